"""Unforgeable lease ids: a compact token naming (shard, sequence, attempt, group), signed with HMAC.

The MAC covers the queue's name and incarnation, so a lease id is useless on any other queue, and
the attempt, so it names one delivery. Verification needs no storage read.

The signing keys live in a Secrets Manager secret (`LeaseKeyring`, JSON): the current key signs, and
each lease id names the key that signed it. A rotation makes a new current key and keeps the old one
as `previous` for one visibility period, so leases handed out before the rotation still ack. A lease
naming a key this process does not know yet (another container saw the rotation first) makes it
re-read the secret, at most once per `FORCED_REFRESH_SECONDS`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sluice.models import MAX_VISIBILITY_MS

_VERSION = 2  # 1: no key id (a single key in the control table, before Secrets Manager)
_LANE_VERSION = 3  # 2 plus the consumer-group lane of the lease (a lane-0 lease is still signed as 2)
_HEADER = struct.Struct(">BHHQH")  # version, key id, shard, seq, attempt
_LANE = struct.Struct(">B")  # version 3: the lane, after the header
_MAC_BYTES = 12
# A retired key verifies this long: the longest visibility timeout, plus slack for containers that
# still sign with it until their cached copy of the secret expires.
PREVIOUS_KEY_VALID_MS = MAX_VISIBILITY_MS + 15 * 60_000
FORCED_REFRESH_SECONDS = 1.0
_KEY_ID_SPACE = 1 << 16


@dataclass(frozen=True)
class Lease:
    shard: int
    seq: int
    attempt: int
    group: str
    lane: int = 0  # the group's lane on the shard that leased it (sluice.engine.lanes)


@dataclass(frozen=True)
class LeaseKeyring:
    """The secret's value. The stack generates `{"current_id": 1, "current": "<random>"}`; rotations
    add `previous`, `previous_id` and `retired_ms` (when `previous` stopped signing) and `access_root`.

    `access_root` is the key SQS access-key secrets are derived from (sluice/engine/accesskeys.py). It
    must outlive rotations (a rotation would otherwise change every issued secret): until the first
    rotation it is derived from the first key, and a rotation writes that value into the document."""

    current_id: int
    current: str
    previous_id: int | None = None
    previous: str | None = None
    retired_ms: int = 0
    access_root: str | None = None

    @property
    def access_key_root(self) -> bytes:
        if self.access_root is not None:
            return self.access_root.encode()
        return hmac.new(self.current.encode(), b"sluice access keys", hashlib.sha256).hexdigest().encode()

    @classmethod
    def parse(cls, text: str) -> LeaseKeyring:
        doc = json.loads(text)
        return cls(
            current_id=int(doc["current_id"]),
            current=str(doc["current"]),
            previous_id=None if doc.get("previous_id") is None else int(doc["previous_id"]),
            previous=doc.get("previous"),
            retired_ms=int(doc.get("retired_ms", 0)),
            access_root=doc.get("access_root"),
        )

    def to_json(self) -> str:
        doc = {"current_id": self.current_id, "current": self.current}
        if self.previous is not None:
            doc |= {"previous_id": self.previous_id, "previous": self.previous, "retired_ms": self.retired_ms}
        if self.access_root is not None:
            doc["access_root"] = self.access_root
        return json.dumps(doc)

    def rotated(self, now_ms: int) -> LeaseKeyring:
        """A new current key; the current one verifies for `PREVIOUS_KEY_VALID_MS` more. The key
        before it is dropped: rotate at most once per visibility period to keep every lease valid."""
        return LeaseKeyring(
            current_id=(self.current_id + 1) % _KEY_ID_SPACE,
            current=secrets.token_urlsafe(48),
            previous_id=self.current_id,
            previous=self.current,
            retired_ms=now_ms,
            access_root=self.access_key_root.decode(),
        )

    def key(self, key_id: int, now_ms: int) -> bytes | None:
        if key_id == self.current_id:
            return self.current.encode()
        if key_id == self.previous_id and self.previous and now_ms < self.retired_ms + PREVIOUS_KEY_VALID_MS:
            return self.previous.encode()
        return None

    def knows(self, key_id: int) -> bool:
        return key_id in (self.current_id, self.previous_id)


class KeyringSource:
    """The keyring from a secret reader `read(force) -> str` (Powertools' SecretsProvider in Lambdas,
    cached with a TTL; `sluice.adapters.secrets.Secret` elsewhere). Parsed once per secret value."""

    def __init__(self, read: Callable[[bool], str]) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._parsed: tuple[str, LeaseKeyring] | None = None
        self._last_forced = 0.0

    def get(self, *, newer: bool = False) -> LeaseKeyring:
        """The keyring; `newer` asks the secret store itself (rate-limited: forged key ids are cheap)."""
        force = False
        if newer:
            with self._lock:
                now = time.monotonic()
                if now - self._last_forced >= FORCED_REFRESH_SECONDS:
                    self._last_forced, force = now, True
        text = self._read(force)
        parsed = self._parsed
        if parsed is None or parsed[0] != text:
            parsed = (text, LeaseKeyring.parse(text))
            self._parsed = parsed
        return parsed[1]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class LeaseSigner:
    def __init__(self, keys: KeyringSource, clock: Callable[[], int]) -> None:
        self._keys = keys
        self._clock = clock

    @staticmethod
    def _mac(key: bytes, queue_key: str, payload: bytes) -> bytes:
        msg = queue_key.encode() + b"\x00" + payload
        return hmac.new(key, msg, hashlib.sha256).digest()[:_MAC_BYTES]

    def sign(self, queue_key: str, lease: Lease) -> str:
        ring = self._keys.get()
        version = _LANE_VERSION if lease.lane else _VERSION
        header = _HEADER.pack(version, ring.current_id, lease.shard, lease.seq, lease.attempt)
        lane = _LANE.pack(lease.lane) if lease.lane else b""
        payload = header + lane + lease.group.encode()
        return _b64(payload + self._mac(ring.current.encode(), queue_key, payload))

    def verify(self, queue_key: str, lease_id: str) -> Lease | None:
        """The lease a valid id names on this queue, or None for anything forged, foreign, garbled, or
        signed with a key that was retired more than a visibility period ago."""
        try:
            raw = _unb64(lease_id)
        except (ValueError, TypeError):
            return None
        if len(raw) < _HEADER.size + _MAC_BYTES:
            return None
        payload, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
        version, key_id, shard, seq, attempt = _HEADER.unpack(payload[: _HEADER.size])
        if version not in (_VERSION, _LANE_VERSION):
            return None
        body = _HEADER.size + (_LANE.size if version == _LANE_VERSION else 0)
        if len(payload) < body:
            return None
        ring = self._keys.get()
        if not ring.knows(key_id):
            ring = self._keys.get(newer=True)  # signed after a rotation this process has not seen yet
        key = ring.key(key_id, self._clock())
        if key is None or not hmac.compare_digest(mac, self._mac(key, queue_key, payload)):
            return None
        try:
            group = payload[body:].decode()
        except UnicodeDecodeError:
            return None
        lane = _LANE.unpack(payload[_HEADER.size : body])[0] if version == _LANE_VERSION else 0
        return Lease(shard=shard, seq=seq, attempt=attempt, group=group, lane=lane)
