"""SQS access keys: an access key id and secret access key a token can be given, so that SigV4 clients
(boto3, the AWS CLI, kombu) authenticate as that token on the SQS face.

The secret is never stored: it is HMAC-SHA256(keyring access root, access key id), the root kept in the
lease-key secret in Secrets Manager (`sluice.leases.LeaseKeyring.access_key_root`, stable across
rotations). What is stored is the id, under `AK#<id>`, with a copy of the token's id, queue and scopes;
the token's own items name the id (`ak`), so revoking the token deletes it and issuing again replaces it.
Lookups are cached per process like tokens' (a revoked key stops working within that TTL).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
from typing import Any

from sluice import errors
from sluice.adapters.dynamo import ConditionFailed, Table
from sluice.engine import keys
from sluice.engine.auth import Principal, principal_of
from sluice.engine.backend import Backend
from sluice.leases import KeyringSource

ACCESS_KEY_PREFIX = "SLUI"  # 20 characters in all, like AWS's own access key ids
SECRET_CHARS = 40


def derive_secret(root: bytes, access_key_id: str) -> str:
    """40 URL-safe characters (a kombu broker URL carries them unquoted)."""
    digest = hmac.new(root, access_key_id.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode()[:SECRET_CHARS]


class AccessKeys:
    def __init__(self, backend: Backend, keyring: KeyringSource, cache_ttl_seconds: float = 30.0) -> None:
        self.backend = backend
        self.keyring = keyring
        self._ttl = cache_ttl_seconds
        self._cache: dict[str, tuple[float, Principal | None]] = {}
        self._lock = threading.Lock()

    def issue(self, token_id: str) -> tuple[str, str]:
        """(access key id, secret access key) for the token; the secret is shown once. A key issued to
        the token before stops working."""
        control = self.backend.control
        listing = control.get(keys.TOKENS_PK, token_id, consistent=True)
        if listing is None:
            raise errors.TokenNotFound(f"token {token_id!r} not found")
        access_key_id = ACCESS_KEY_PREFIX + base64.b32encode(secrets.token_bytes(10)).decode()
        control.put(
            {
                keys.PK: keys.access_key_pk(access_key_id),
                keys.SK: keys.ACCESS_KEY_SK,
                keys.TOKEN_ID: token_id,
                keys.TOKEN_QUEUE: listing[keys.TOKEN_QUEUE],
                keys.TOKEN_SCOPES: listing[keys.TOKEN_SCOPES],
                keys.CREATED_MS: self.backend.clock(),
                **{k: listing[k] for k in (keys.TOKEN_EXPIRES_MS, keys.TTL) if k in listing},
            },
            condition=keys.NEW_ITEM,
        )
        try:
            for pk, sk in (
                (keys.token_pk(listing[keys.TOKEN_DIGEST]), keys.TOKEN_SK),
                (keys.TOKENS_PK, token_id),
            ):
                control.update(
                    pk,
                    sk,
                    f"SET {keys.TOKEN_ACCESS_KEY} = :ak",
                    condition=keys.ITEM_EXISTS,
                    values={":ak": access_key_id},
                )
        except ConditionFailed as exc:  # revoked meanwhile: the key must not outlive its token
            self.forget(access_key_id)
            raise errors.TokenNotFound(f"token {token_id!r} not found") from exc
        old = listing.get(keys.TOKEN_ACCESS_KEY)
        if old:
            self.forget(old)
        return access_key_id, self.secret(access_key_id)

    def forget(self, access_key_id: str) -> None:
        self.backend.control.delete(keys.access_key_pk(access_key_id), keys.ACCESS_KEY_SK)
        with self._lock:
            self._cache.pop(access_key_id, None)

    def secret(self, access_key_id: str) -> str:
        return derive_secret(self.keyring.get().access_key_root, access_key_id)

    def principal(self, access_key_id: str) -> Principal | None:
        """The token an access key id was issued to (None: unknown or revoked)."""
        now = self.backend.clock.monotonic()  # the twin's virtual time too
        with self._lock:
            cached = self._cache.get(access_key_id)
        if cached and cached[0] > now:
            return cached[1]
        item = self._read(self.backend.local_control, access_key_id)
        if item is None and self.backend.control_replica is not None:
            try:  # a key issued a moment ago may not have replicated yet
                item = self._read(self.backend.control, access_key_id)
            except errors.DependencyUnavailable:
                item = None
        principal = None if item is None else principal_of(item)
        with self._lock:
            self._cache[access_key_id] = (now + self._ttl, principal)
        return principal

    @staticmethod
    def _read(table: Table, access_key_id: str) -> dict[str, Any] | None:
        return table.get(keys.access_key_pk(access_key_id), keys.ACCESS_KEY_SK, consistent=False)
