"""A consumer group's state on one shard: Cherami's ack-level scheme in one small item.

`read` is the next sequence never scanned. Every sequence below `read` is either done or listed in
`pending` (leased, delayed, or waiting for redelivery), so the ack level is simply the lowest pending
sequence, or `read` when nothing is pending. Acks delete entries; nothing grows with the stream.

The item is rewritten on every pull and ack, and write units are paid per KB, so the pending map is
stored column-wise, delta-encoded and zlib-compressed: a hundred leases from one pull share a
deadline and consecutive sequences, and pack into a few dozen bytes.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field


@dataclass
class Pending:
    item: int  # first sequence of the batch item that holds the message
    due_ms: int  # lease deadline when leased, otherwise the time it may be delivered
    attempts: int  # deliveries so far
    leased: bool


@dataclass
class GroupState:
    read: int = 0
    read_item: int = 0  # first sequence of the item that holds `read` (where the next scan starts)
    pending: dict[int, Pending] = field(default_factory=dict)
    version: int = 0  # 0: never stored
    keys: dict[int, str] = field(default_factory=dict)  # ordered queues: pending seq → key tag
    end: int = 0  # a lane of split lanes: the end of the range it reads (sluice.engine.lanes); 0: none

    @property
    def ack_level(self) -> int:
        return min(self.pending, default=self.read)

    def due(self, now_ms: int) -> list[int]:
        return sorted(seq for seq, p in self.pending.items() if p.due_ms <= now_ms)

    def encode(self) -> bytes:
        seqs = sorted(self.pending)
        entries = [self.pending[s] for s in seqs]
        doc = {
            "r": self.read,
            "ri": self.read_item,
            "s": _deltas(seqs),
            "i": [s - p.item for s, p in zip(seqs, entries, strict=True)],
            "d": _deltas([p.due_ms for p in entries]),
            "a": [p.attempts for p in entries],
            "l": [int(p.leased) for p in entries],
        }
        if any(s in self.keys for s in seqs):  # ordered queues only (see engine/ordering.py)
            doc["k"] = [self.keys.get(s, "") for s in seqs]
        if self.end:
            doc["e"] = self.end
        return zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 9)

    @classmethod
    def decode(cls, blob: bytes, version: int) -> GroupState:
        doc = json.loads(zlib.decompress(blob))
        seqs = _undeltas(doc["s"])
        dues = _undeltas(doc["d"])
        pending = {
            seq: Pending(item=seq - back, due_ms=due, attempts=attempts, leased=bool(leased))
            for seq, back, due, attempts, leased in zip(seqs, doc["i"], dues, doc["a"], doc["l"], strict=True)
        }
        tags = {seq: tag for seq, tag in zip(seqs, doc.get("k", []), strict=False) if tag}
        return cls(
            read=doc["r"],
            read_item=doc["ri"],
            pending=pending,
            version=version,
            keys=tags,
            end=doc.get("e", 0),
        )


def _deltas(values: list[int]) -> list[int]:
    return [b - a for a, b in zip([0, *values], values, strict=False)]


def _undeltas(deltas: list[int]) -> list[int]:
    out, total = [], 0
    for d in deltas:
        total += d
        out.append(total)
    return out
