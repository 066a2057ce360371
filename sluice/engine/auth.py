"""Bearer tokens: stored only as SHA-256 hashes, with scopes, bound to one queue or to all (`*`).

Tokens carry 256 bits of randomness, so a fast hash is enough (no password stretching needed).
Lookups are cached per process for a short TTL to keep them off the hot path; a revoked token
stops working within that TTL. A token minted with a lifetime is refused (401, "expired") from its
`expires_ms` on, cached or not; its items carry the tables' TTL a week later, so DynamoDB drops them
after the week in which the API still says why the token stopped working.

Multi-region: tokens are created and revoked in the home region's control table; verification reads
this region's replica of it (no cross-region call on the hot path). A token the replica does not
know yet (created less than a replication lag ago) is looked up once in the home table before it is
refused, so a fresh token works at once everywhere that can reach the home region.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sluice import errors
from sluice.adapters.dynamo import ConditionFailed, Table
from sluice.adapters.secrets import Secret
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.leases import LeaseKeyring
from sluice.names import ALL_QUEUES, check_token_binding

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[Scope, ...] = ("read", "write", "admin")

TOKEN_PREFIX = "sluice_"
MAX_TOKEN_LIFETIME_SECONDS = 10 * 365 * 86_400
EXPIRED_KEPT_SECONDS = 7 * 86_400  # an expired token's items stay this long (401 "expired", not "unknown")


@dataclass(frozen=True)
class Principal:
    token_id: str
    queue: str
    scopes: frozenset[str]
    expires_ms: int | None = None

    def expired(self, now_ms: int) -> bool:
        return self.expires_ms is not None and now_ms >= self.expires_ms

    def allows(self, scope: Scope, queue: str | None) -> bool:
        if "admin" in self.scopes and self.queue == ALL_QUEUES:
            return True
        if queue is not None and self.queue not in (ALL_QUEUES, queue):
            return False
        return scope in self.scopes or "admin" in self.scopes


def principal_of(item: dict[str, Any]) -> Principal:
    """The principal a token item (or an access key's item, which copies it) describes."""
    expires = item.get(keys.TOKEN_EXPIRES_MS)
    return Principal(
        item[keys.TOKEN_ID],
        item[keys.TOKEN_QUEUE],
        frozenset(item[keys.TOKEN_SCOPES]),
        None if expires is None else int(expires),
    )


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    def __init__(self, backend: Backend, cache_ttl_seconds: float = 30.0) -> None:
        self.backend = backend
        self._ttl = cache_ttl_seconds
        self._cache: dict[str, tuple[float, Principal | None]] = {}
        self._lock = threading.Lock()

    def expiry_after(self, seconds: int) -> int:
        """The `expires_ms` of a token minted now that lives `seconds`."""
        return self.backend.clock() + seconds * 1000

    def create(
        self, queue: str, scopes: Sequence[str], token: str | None = None, expires_ms: int | None = None
    ) -> tuple[str, str]:
        """(token_id, token). The token is shown once; only its hash is stored."""
        check_token_binding(queue)  # the one name rule: a token cannot be bound to "../x"
        unknown = sorted(set(scopes) - set(SCOPES))
        if not scopes or unknown:
            raise errors.InvalidRequest(f"scopes must be a non-empty list of {', '.join(SCOPES)}")
        token = token or TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = secrets.token_hex(8)
        digest = _digest(token)
        now = self.backend.clock()
        lifetime = {}
        if expires_ms is not None:
            lifetime = {
                keys.TOKEN_EXPIRES_MS: expires_ms,
                keys.TTL: expires_ms // 1000 + EXPIRED_KEPT_SECONDS,
            }
        try:
            self.backend.control.put(
                {
                    keys.PK: keys.token_pk(digest),
                    keys.SK: keys.TOKEN_SK,
                    keys.TOKEN_ID: token_id,
                    keys.TOKEN_QUEUE: queue,
                    keys.TOKEN_SCOPES: sorted(set(scopes)),
                    keys.CREATED_MS: now,
                    **lifetime,
                },
                condition=keys.NEW_ITEM,
            )
        except ConditionFailed as exc:
            existing = exc.item or {}
            return existing.get(keys.TOKEN_ID, token_id), token  # the same secret was registered before
        self.backend.control.put(
            {
                keys.PK: keys.TOKENS_PK,
                keys.SK: token_id,
                keys.TOKEN_DIGEST: digest,
                keys.TOKEN_QUEUE: queue,
                keys.TOKEN_SCOPES: sorted(set(scopes)),
                keys.CREATED_MS: now,
                **lifetime,
            }
        )
        return token_id, token

    def list(self) -> list[dict[str, object]]:
        return [
            {
                "token_id": item[keys.SK],
                "queue": item[keys.TOKEN_QUEUE],
                "scopes": item[keys.TOKEN_SCOPES],
                "created_on": item[keys.CREATED_MS],
                "expires_on": item.get(keys.TOKEN_EXPIRES_MS),
            }
            for item in self.backend.control.query(keys.TOKENS_PK, consistent=True)
        ]

    def revoke(self, token_id: str) -> None:
        item = self.backend.control.get(keys.TOKENS_PK, token_id)
        if item is None:
            raise errors.TokenNotFound(f"token {token_id!r} not found")
        self.backend.control.delete(keys.token_pk(item[keys.TOKEN_DIGEST]), keys.TOKEN_SK)
        if item.get(keys.TOKEN_ACCESS_KEY):  # its SQS access key goes with it
            self.backend.control.delete(keys.access_key_pk(item[keys.TOKEN_ACCESS_KEY]), keys.ACCESS_KEY_SK)
        self.backend.control.delete(keys.TOKENS_PK, token_id)
        with self._lock:
            self._cache.pop(item[keys.TOKEN_DIGEST], None)

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal of an `Authorization: Bearer <token>` header value, or Unauthorized."""
        if not authorization:
            raise errors.Unauthorized("missing token: send 'Authorization: Bearer <token>'")
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else authorization.strip()
        if not token:
            raise errors.Unauthorized("missing token: send 'Authorization: Bearer <token>'")
        digest = _digest(token)
        now = self.backend.clock.monotonic()
        with self._lock:
            cached = self._cache.get(digest)
        if cached and cached[0] > now:
            principal = cached[1]
        else:
            principal = self._lookup(digest)
            with self._lock:
                self._cache[digest] = (now + self._ttl, principal)
        if principal is None:
            raise errors.Unauthorized("unknown or revoked token")
        if principal.expires_ms is not None and principal.expired(self.backend.clock()):
            at = datetime.fromtimestamp(principal.expires_ms / 1000, UTC)
            expired = at.strftime("%Y-%m-%dT%H:%M:%SZ")
            raise errors.Unauthorized(f"token expired at {expired}: mint a new one")
        return principal

    def _lookup(self, digest: str) -> Principal | None:
        """The token's principal from this region's replica; a miss asks the home table once (a
        replica may not have a token created a moment ago). Home unreachable: the replica's answer."""
        item = self._read(self.backend.local_control, digest)
        if item is None and self.backend.control_replica is not None:
            try:
                item = self._read(self.backend.control, digest)
            except errors.DependencyUnavailable:
                item = None
        if item is None:
            return None
        return principal_of(item)

    @staticmethod
    def _read(table: Table, digest: str) -> dict[str, Any] | None:
        item = table.get(keys.token_pk(digest), keys.TOKEN_SK, consistent=False)
        if item is not None and hmac.compare_digest(item[keys.PK], keys.token_pk(digest)):
            return item
        return None

    @staticmethod
    def authorize(principal: Principal, scope: Scope, queue: str | None = None) -> None:
        if not principal.allows(scope, queue):
            raise errors.Forbidden(f"this token lacks the {scope!r} scope for this resource")


def rotate_lease_key(secret: Secret, now_ms: int) -> LeaseKeyring:
    """Write a new lease-signing key as the secret's next version; the old one keeps verifying for one
    visibility period (`sluice.leases.PREVIOUS_KEY_VALID_MS`), so no live lease is invalidated."""
    ring = LeaseKeyring.parse(secret.read(force=True)).rotated(now_ms)
    secret.write(ring.to_json())
    return ring
