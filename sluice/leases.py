"""Unforgeable lease ids: a compact token naming (shard, sequence, attempt, group), signed with HMAC.

The MAC covers the queue's name and incarnation, so a lease id is useless on any other queue, and
the attempt, so it names one delivery. Verification needs no storage read.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from dataclasses import dataclass

_VERSION = 1
_HEADER = struct.Struct(">BHQH")  # version, shard, seq, attempt
_MAC_BYTES = 12


@dataclass(frozen=True)
class Lease:
    shard: int
    seq: int
    attempt: int
    group: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class LeaseSigner:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, queue_key: str, payload: bytes) -> bytes:
        msg = queue_key.encode() + b"\x00" + payload
        return hmac.new(self._secret, msg, hashlib.sha256).digest()[:_MAC_BYTES]

    def sign(self, queue_key: str, lease: Lease) -> str:
        payload = _HEADER.pack(_VERSION, lease.shard, lease.seq, lease.attempt) + lease.group.encode()
        return _b64(payload + self._mac(queue_key, payload))

    def verify(self, queue_key: str, lease_id: str) -> Lease | None:
        """The lease a valid id names on this queue, or None for anything forged, foreign or garbled."""
        try:
            raw = _unb64(lease_id)
        except (ValueError, TypeError):
            return None
        if len(raw) < _HEADER.size + _MAC_BYTES:
            return None
        payload, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
        if not hmac.compare_digest(mac, self._mac(queue_key, payload)):
            return None
        version, shard, seq, attempt = _HEADER.unpack(payload[: _HEADER.size])
        if version != _VERSION:
            return None
        try:
            group = payload[_HEADER.size :].decode()
        except UnicodeDecodeError:
            return None
        return Lease(shard=shard, seq=seq, attempt=attempt, group=group)
