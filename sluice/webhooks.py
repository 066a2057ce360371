"""Signed webhook deliveries: the one owner of the signature's wire format, for the push worker that signs
and for the SDK that checks (`sluice.client.Client.verify_webhook`).

Every webhook POST carries three headers, in the shape of the Standard Webhooks specification's
asymmetric variant (https://www.standardwebhooks.com):

    webhook-id:         a random id, new for every delivery attempt (a retry is a new attempt)
    webhook-timestamp:  when the attempt was signed, Unix seconds
    webhook-signature:  "v1a,<base64 Ed25519 signature>" over "<webhook-id>.<webhook-timestamp>.<raw body>"

The public keys are a JWKS document (RFC 7517/8037: `kty` OKP, `crv` Ed25519) served without a token at
`GET /v1/webhooks/jwks`, so a receiver needs no shared secret: a forged POST cannot carry a signature the
published keys accept, a changed body breaks the signature, and a captured delivery replayed later fails
the timestamp window (`TOLERANCE_SECONDS`) or, inside it, the verifier's memory of the ids it accepted.

Keys: derived from the lease-key secret (`sluice.leases.LeaseKeyring`), each Ed25519 private key being
HMAC-SHA256(lease key, `SIGNING_LABEL`): a key used for nothing but webhooks, with no second secret to
store, grant or rotate. `sluice lease-key rotate` therefore rotates it too: the new current key signs, and
the JWKS keeps the previous key while it verifies leases (one visibility period), far longer than a
receiver's cache of the document; a receiver that meets a signature none of its cached keys accepts
fetches the document again once (`WebhookVerifier`).

`cryptography` (in the Powertools layer Lambda runs with) is imported on first use only: functions that
never push to a webhook do not pay for it at cold start. The receiver's side imports nothing but the
standard library until it verifies (the SDK runs on Glue executors, which have no pydantic).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    from sluice.leases import KeyringSource

HEADER_ID = "webhook-id"
HEADER_TIMESTAMP = "webhook-timestamp"
HEADER_SIGNATURE = "webhook-signature"
SIGNATURE_VERSION = "v1a"  # Standard Webhooks' tag for an Ed25519 signature
SIGNING_LABEL = b"sluice webhook signing key v1"
TOLERANCE_SECONDS = 300  # a delivery signed longer ago (or that far in the future) is refused
REFETCH_SECONDS = 30.0  # signatures no cached key accepts refetch the keys at most this often
JWKS_PATH = "/v1/webhooks/jwks"


class WebhookVerificationError(ValueError):
    """The request is not a delivery from this Sluice deployment (or not one to accept now)."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def signing_key(lease_key: str) -> Ed25519PrivateKey:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    seed = hmac.new(lease_key.encode(), SIGNING_LABEL, hashlib.sha256).digest()
    return Ed25519PrivateKey.from_private_bytes(seed)


def signed_content(webhook_id: str, timestamp: str, body: bytes) -> bytes:
    return f"{webhook_id}.{timestamp}.".encode() + body


def _jwk(kid: int, key: Ed25519PrivateKey) -> dict[str, str]:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return {"kty": "OKP", "crv": "Ed25519", "x": _b64url(raw), "kid": str(kid), "use": "sig", "alg": "EdDSA"}


class WebhookSigner:
    """Signs deliveries with the current key and publishes the keys that verify them."""

    def __init__(self, keys: KeyringSource, clock: Callable[[], int]) -> None:
        self._keys = keys
        self._clock = clock  # ms
        self._derived: dict[str, Ed25519PrivateKey] = {}

    def _key(self, lease_key: str) -> Ed25519PrivateKey:
        key = self._derived.get(lease_key)
        if key is None:
            key = self._derived[lease_key] = signing_key(lease_key)
        return key

    def headers(self, body: bytes) -> dict[str, str]:
        """The headers of one delivery attempt of `body` (the exact bytes POSTed)."""
        ring = self._keys.get()
        webhook_id = "wh_" + secrets.token_hex(12)
        timestamp = str(self._clock() // 1000)
        signature = self._key(ring.current).sign(signed_content(webhook_id, timestamp, body))
        return {
            HEADER_ID: webhook_id,
            HEADER_TIMESTAMP: timestamp,
            HEADER_SIGNATURE: f"{SIGNATURE_VERSION},{base64.b64encode(signature).decode()}",
        }

    def jwks(self) -> dict[str, Any]:
        """The public keys a receiver accepts: the current key and, while it still verifies leases, the
        previous one."""
        from sluice.leases import PREVIOUS_KEY_VALID_MS

        ring = self._keys.get()
        keys = [_jwk(ring.current_id, self._key(ring.current))]
        live = ring.previous and self._clock() < ring.retired_ms + PREVIOUS_KEY_VALID_MS
        if live and ring.previous and ring.previous_id is not None:
            keys.append(_jwk(ring.previous_id, self._key(ring.previous)))
        return {"keys": keys}


def public_keys(jwks: Mapping[str, Any]) -> list[Ed25519PublicKey]:
    """The Ed25519 keys of a JWKS document (other key types are skipped)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    found = []
    for jwk in jwks.get("keys", []):
        if jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519" and isinstance(jwk.get("x"), str):
            try:
                found.append(Ed25519PublicKey.from_public_bytes(_unb64url(jwk["x"])))
            except ValueError:
                continue
    return found


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    raise WebhookVerificationError(f"missing header {name!r}: not a signed Sluice delivery")


class WebhookVerifier:
    """Checks deliveries against a deployment's JWKS (`fetch_jwks()`, fetched lazily, again once when no
    cached key accepts a signature: the deployment may have rotated). Remembers the ids it accepted for
    the tolerance window, so a captured delivery replayed inside the window is refused too; one verifier
    per receiving process (several processes behind a load balancer each keep their own memory, and the
    timestamp window bounds what they can be replayed)."""

    def __init__(
        self,
        fetch_jwks: Callable[[], Mapping[str, Any]],
        *,
        tolerance_seconds: int = TOLERANCE_SECONDS,
        clock: Callable[[], float] = time.time,
        max_remembered: int = 100_000,
    ) -> None:
        self._fetch = fetch_jwks
        self._tolerance = tolerance_seconds
        self._clock = clock
        self._max = max_remembered
        self._keys: list[Ed25519PublicKey] | None = None
        self._refreshed_at = float("-inf")
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def verify(self, headers: Mapping[str, str], body: bytes | str) -> None:
        """Return if `body` with `headers` is a delivery signed by the deployment, recent and not seen
        before; raise `WebhookVerificationError` otherwise. `body`: the raw request body, unparsed."""
        raw = body.encode() if isinstance(body, str) else body
        webhook_id = _header(headers, HEADER_ID)
        stamp = _header(headers, HEADER_TIMESTAMP)
        try:
            signed_at = int(stamp)
        except ValueError:
            raise WebhookVerificationError(f"{HEADER_TIMESTAMP} {stamp!r} is not Unix seconds") from None
        now = self._clock()
        if abs(now - signed_at) > self._tolerance:
            raise WebhookVerificationError(
                f"delivery signed {int(now - signed_at)} s ago, outside the {self._tolerance} s window: "
                "a replay or a badly wrong clock"
            )
        signatures = self._signatures(_header(headers, HEADER_SIGNATURE))
        content = signed_content(webhook_id, stamp, raw)
        if not self._accepted(signatures, content, refresh=False) and not self._accepted(
            signatures, content, refresh=True
        ):
            raise WebhookVerificationError("no published key accepts the signature: forged or altered")
        with self._lock:
            self._forget(now)
            if webhook_id in self._seen:
                raise WebhookVerificationError(f"delivery {webhook_id} was already accepted: a replay")
            self._seen[webhook_id] = signed_at

    @staticmethod
    def _signatures(header: str) -> list[bytes]:
        found = []
        for part in header.split():
            version, _, value = part.partition(",")
            if version == SIGNATURE_VERSION:
                try:
                    found.append(base64.b64decode(value, validate=True))
                except ValueError:
                    continue
        if not found:
            raise WebhookVerificationError(f"{HEADER_SIGNATURE} holds no {SIGNATURE_VERSION} signature")
        return found

    def _accepted(self, signatures: list[bytes], content: bytes, *, refresh: bool) -> bool:
        from cryptography.exceptions import InvalidSignature

        if self._keys is None:
            self._keys = public_keys(self._fetch())
        elif refresh:
            if time.monotonic() - self._refreshed_at < REFETCH_SECONDS:
                return False
            self._refreshed_at = time.monotonic()
            self._keys = public_keys(self._fetch())
        for key in self._keys:
            for signature in signatures:
                try:
                    key.verify(signature, content)
                    return True
                except InvalidSignature:
                    continue
        return False

    def _forget(self, now: float) -> None:
        while self._seen and (
            len(self._seen) >= self._max or next(iter(self._seen.values())) < now - self._tolerance
        ):
            self._seen.popitem(last=False)
