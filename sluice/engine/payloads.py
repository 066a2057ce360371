"""A batch item's payload: inline in the item, or in the payload tier (one S3 object per send).

The shard store (`sluice.engine.store`) is the one place that turns a batch item into its messages:
for a payload-tier item it hands back an `ItemMessages`, which fetches the bodies from S3 as asked.

Payload tier (chosen per send by `sluice.engine.tierpolicy`):
- The object, `payload/<shard pk>/<first seq 16d>` in the shard's segment bucket, holds the send's
  bodies back to back, uncompressed, so any run of messages is one ranged GET. It is tagged with the
  days it must live (`PAYLOAD_DAYS_TAG`); the stack's lifecycle rules expire it by that tag, a day after
  its batch item's own expiry (`tierpolicy.object_days`).
- The batch items are the index: `d` is the codec blob of the messages' headers (content type, key,
  attributes, delay) with empty bodies and each body's length (`StoredMessage.payload_len`); `p` is the
  object key and `pb` where the item's first body starts in it (a send whose headers need more than
  one item shares one object between them).
- Crash safety: the object is written before its items, so a crash leaves an object no item names (an
  orphan), never an item naming a missing object. The sequences of such a send end up a sealed gap;
  the flush that passes them deletes the objects keyed inside it (`orphans_in`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import overload

from sluice import constants, errors
from sluice.adapters.s3 import Bucket
from sluice.codec import StoredMessage
from sluice.engine import tierpolicy
from sluice.offsets import seq_key


class PayloadMissing(errors.DependencyUnavailable):
    """A batch item names a payload object that is not there (never expected: the object is written
    first and expires a day after its item)."""


def object_prefix(shard_pk: str) -> str:
    return f"{constants.PAYLOAD_PREFIX}{shard_pk}/"


def object_key(shard_pk: str, first_seq: int) -> str:
    return f"{object_prefix(shard_pk)}{seq_key(first_seq)}"


def seq_of_key(key: str) -> int:
    return int(key.rsplit("/", 1)[1])


@dataclass
class TierObject:
    """A send in the payload tier: the object's bytes and the index entries its items hold."""

    key: str
    data: bytes
    index: list[StoredMessage]
    tags: dict[str, str]

    @classmethod
    def of(cls, shard_pk: str, first_seq: int, stored: Sequence[StoredMessage], days: int) -> TierObject:
        index = [replace(m, body=b"", payload_len=len(m.body)) for m in stored]
        data = b"".join(m.body for m in stored)
        tags = {constants.PAYLOAD_DAYS_TAG: str(days)}
        return cls(object_key(shard_pk, first_seq), data, index, tags)

    def base_of(self, index_offset: int) -> int:
        """Where the body of `index[index_offset]` starts in the object (an item's `pb`)."""
        return sum(m.payload_len or 0 for m in self.index[:index_offset])


def plan(
    setting: tierpolicy.PayloadTier, stored: Sequence[StoredMessage], hot_seconds: int, bottomless: bool
) -> str:
    """`dynamodb` or `s3` for one send's messages under the queue's `payload_tier`."""
    if setting != "auto":
        return setting
    if any(m.overflow_key for m in stored):
        return "dynamodb"
    raw = sum(len(m.body) for m in stored)
    if not tierpolicy.might_pay_in_s3(raw):
        return "dynamodb"
    body = b"".join(m.body[: 16 * 1024] for m in stored)  # the estimate reads a sample only
    ratio = tierpolicy.estimate_item_bytes(body) / max(1, len(body))
    shape = tierpolicy.BatchShape(len(stored), raw, int(raw * ratio), hot_seconds, bottomless)
    return tierpolicy.choose_tier("auto", shape)


ReadRange = Callable[[str, int, int], bytes | None]
"""(object key, start, end) → bytes [start, end) of the object, or None if it is not there."""


class ItemMessages(Sequence[StoredMessage]):
    """The messages of one payload-tier batch item, bodies included, from its index (`headers`: the
    item's decoded `d`). Bodies are fetched on first access, from the message asked for to the item's
    end in one ranged GET (readers walk forward), earlier ones by another GET if asked for later."""

    def __init__(self, read_range: ReadRange, key: str, base: int, headers: Iterable[StoredMessage]) -> None:
        self._read_range = read_range
        self._key = key
        self._stored = list(headers)
        self._loaded_from = len(self._stored)  # bodies [_loaded_from, len) are in place
        self._starts = [base]
        for m in self._stored:
            self._starts.append(self._starts[-1] + (m.payload_len or 0))

    def __len__(self) -> int:
        return len(self._stored)

    @overload
    def __getitem__(self, index: int) -> StoredMessage: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[StoredMessage]: ...
    def __getitem__(self, index: int | slice) -> StoredMessage | Sequence[StoredMessage]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if index < self._loaded_from:
            self._load(index, self._loaded_from)
        return self._stored[index]

    def __iter__(self) -> Iterator[StoredMessage]:
        return (self[i] for i in range(len(self)))

    def _load(self, lo: int, hi: int) -> None:
        data = self._read_range(self._key, self._starts[lo], self._starts[hi])
        if data is None:
            raise PayloadMissing(f"payload object {self._key} is missing; retry shortly")
        base = self._starts[lo]
        for i in range(lo, hi):
            body = data[self._starts[i] - base : self._starts[i + 1] - base]
            self._stored[i] = replace(self._stored[i], body=body, payload_len=None)
        self._loaded_from = lo


def orphans_in(bucket: Bucket, shard_pk: str, lo: int, hi: int) -> int:
    """Delete the tier objects keyed in [lo, hi), a range the flush passed without finding a record
    there (a sealed gap, or items past their expiry). Such an object's send never wrote its first
    item, or the item is gone: nothing names it. Returns how many were deleted."""
    prefix = object_prefix(shard_pk)
    start_after = object_key(shard_pk, lo - 1) if lo > 0 else ""
    doomed: list[str] = []
    for key in bucket.keys(prefix, start_after=start_after):
        if seq_of_key(key) >= hi:
            break
        doomed.append(key)
    bucket.delete_many(doomed)
    return len(doomed)
