"""Signed webhook deliveries (sluice/webhooks.py): what a receiver's check accepts and refuses, and key
rotation through the lease-key secret the signing keys derive from."""

from __future__ import annotations

import json

import pytest

from sluice.leases import PREVIOUS_KEY_VALID_MS, KeyringSource, LeaseKeyring
from sluice.webhooks import (
    HEADER_ID,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    TOLERANCE_SECONDS,
    WebhookSigner,
    WebhookVerificationError,
    WebhookVerifier,
)

NOW_MS = 1_760_000_000_000
BODY = json.dumps({"messages": [{"id": "m1", "body": "hello"}]}).encode()


class Secret:
    """The lease-key secret's value, as a test changes it (a rotation writes a new version)."""

    def __init__(self, ring: LeaseKeyring) -> None:
        self.ring = ring
        self.reads = 0

    def read(self, _force: bool) -> str:
        self.reads += 1
        return self.ring.to_json()


def _signer(secret: Secret, now_ms: list[int]) -> WebhookSigner:
    return WebhookSigner(KeyringSource(secret.read), lambda: now_ms[0])


@pytest.fixture
def now() -> list[int]:
    return [NOW_MS]


@pytest.fixture
def secret() -> Secret:
    return Secret(LeaseKeyring(current_id=7, current="lease-key-of-this-deployment-" + "x" * 40))


@pytest.fixture
def signer(secret: Secret, now: list[int]) -> WebhookSigner:
    return _signer(secret, now)


def _verifier(signer: WebhookSigner, now: list[int], fetches: list[int] | None = None) -> WebhookVerifier:
    def fetch() -> dict:
        if fetches is not None:
            fetches.append(1)
        return signer.jwks()

    return WebhookVerifier(fetch, clock=lambda: now[0] / 1000)


def test_a_delivery_verifies_and_its_headers_follow_standard_webhooks(signer, now) -> None:
    headers = signer.headers(BODY)
    assert headers[HEADER_ID].startswith("wh_") and headers[HEADER_TIMESTAMP] == str(NOW_MS // 1000)
    assert headers[HEADER_SIGNATURE].startswith("v1a,")
    _verifier(signer, now).verify(headers, BODY)
    # header names are case-insensitive in HTTP; the body may come as text
    _verifier(signer, now).verify({k.title(): v for k, v in headers.items()}, BODY.decode())


def test_each_attempt_gets_its_own_id(signer) -> None:
    assert signer.headers(BODY)[HEADER_ID] != signer.headers(BODY)[HEADER_ID]


def test_a_forged_delivery_is_rejected(signer, now) -> None:
    """Signed by another deployment's key, unsigned, or with a garbled signature."""
    other = _signer(Secret(LeaseKeyring(current_id=7, current="someone-else-" + "y" * 40)), now)
    verifier = _verifier(signer, now)
    with pytest.raises(WebhookVerificationError, match="no published key"):
        verifier.verify(other.headers(BODY), BODY)
    with pytest.raises(WebhookVerificationError, match="missing header"):
        verifier.verify({"content-type": "application/json"}, BODY)
    garbled = {**signer.headers(BODY), HEADER_SIGNATURE: "v1a,not-base64!"}
    with pytest.raises(WebhookVerificationError, match="no v1a signature"):
        verifier.verify(garbled, BODY)
    hmac_only = {**signer.headers(BODY), HEADER_SIGNATURE: "v1,c2lnbmF0dXJl"}
    with pytest.raises(WebhookVerificationError):
        verifier.verify(hmac_only, BODY)


def test_a_tampered_body_or_header_is_rejected(signer, now) -> None:
    headers = signer.headers(BODY)
    verifier = _verifier(signer, now)
    with pytest.raises(WebhookVerificationError, match="forged or altered"):
        verifier.verify(headers, BODY.replace(b"hello", b"HELLO"))
    with pytest.raises(WebhookVerificationError, match="forged or altered"):
        verifier.verify({**headers, HEADER_ID: "wh_other"}, BODY)
    with pytest.raises(WebhookVerificationError, match="forged or altered"):
        verifier.verify({**headers, HEADER_TIMESTAMP: str(int(headers[HEADER_TIMESTAMP]) + 1)}, BODY)


def test_a_replayed_delivery_is_rejected(signer, now) -> None:
    """Inside the window: the id was accepted already. Later: the timestamp is too old."""
    headers = signer.headers(BODY)
    verifier = _verifier(signer, now)
    verifier.verify(headers, BODY)
    with pytest.raises(WebhookVerificationError, match="already accepted"):
        verifier.verify(headers, BODY)
    now[0] += (TOLERANCE_SECONDS + 1) * 1000
    with pytest.raises(WebhookVerificationError, match="outside the 300 s window"):
        _verifier(signer, now).verify(headers, BODY)
    # a delivery dated in the future (a signer with a wrong clock) is refused the same way
    future = signer.headers(BODY)
    now[0] -= 2 * (TOLERANCE_SECONDS + 1) * 1000
    with pytest.raises(WebhookVerificationError, match="outside"):
        _verifier(signer, now).verify(future, BODY)


def test_a_rotation_keeps_earlier_deliveries_valid_and_receivers_pick_up_the_new_key(
    secret, signer, now
) -> None:
    before = signer.headers(BODY)
    fetches: list[int] = []
    receiver = _verifier(signer, now, fetches)
    receiver.verify(before, BODY)
    assert len(fetches) == 1
    secret.ring = secret.ring.rotated(now[0])  # `sluice lease-key rotate`
    assert {k["kid"] for k in signer.jwks()["keys"]} == {"7", str(secret.ring.current_id)}
    after = signer.headers(BODY)
    receiver.verify(after, BODY)  # its cached keys predate the rotation: it fetches them again once
    assert len(fetches) == 2
    _verifier(signer, now).verify({**before, HEADER_ID: before[HEADER_ID]}, BODY)  # still valid
    now[0] += PREVIOUS_KEY_VALID_MS  # the previous key stops verifying leases: it leaves the JWKS
    assert [k["kid"] for k in signer.jwks()["keys"]] == [str(secret.ring.current_id)]


def test_forged_signatures_cannot_make_a_receiver_hammer_the_key_endpoint(signer, now) -> None:
    fetches: list[int] = []
    receiver = _verifier(signer, now, fetches)
    other = _signer(Secret(LeaseKeyring(current_id=1, current="attacker-" + "z" * 40)), now)
    for _ in range(20):
        with pytest.raises(WebhookVerificationError):
            receiver.verify(other.headers(BODY), BODY)
    assert len(fetches) == 2  # the first fetch, then one refresh per REFETCH_SECONDS


def test_the_signing_key_is_not_the_lease_key(signer, secret) -> None:
    """The JWKS publishes public keys only, and they derive from, but are not, the lease key."""
    (jwk,) = signer.jwks()["keys"]
    assert set(jwk) == {"kty", "crv", "x", "kid", "use", "alg"}
    assert (jwk["kty"], jwk["crv"], jwk["alg"]) == ("OKP", "Ed25519", "EdDSA")
    assert secret.ring.current not in json.dumps(signer.jwks())
