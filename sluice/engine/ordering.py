"""Ordered queues on the pull path: one lease at a time per partition key (SQS FIFO's message-group
rule), delivered in publish order.

Publish already puts every message of a key on one shard (a hash over the open shards), in sequence
order. Per shard and group the state remembers, for each pending entry of an ordered queue, a short
tag of its key (`GroupState.keys`). A message may be leased only when no earlier pending entry has
the same tag: a fresh message behind a leased one waits in `pending` (not leased, due now), and
becomes deliverable once everything before it with its key is acked — or, when the earlier one is
retried, only after that one is delivered and acked again. Messages without a key are not held.
"""

from __future__ import annotations

import hashlib

from sluice.engine.groupstate import GroupState, Pending


def key_tag(partition_key: str | None) -> str | None:
    """8 hex characters of the key's hash: enough to tell keys apart inside one shard's pending set
    (a collision only makes two keys share a turn, never reorders one)."""
    if partition_key is None:
        return None
    return hashlib.blake2b(partition_key.encode(), digest_size=4).hexdigest()


def _held_tags(state: GroupState, before: int | None = None) -> set[str]:
    return {
        tag for seq, tag in state.keys.items() if seq in state.pending and (before is None or seq < before)
    }


def hold_fresh(state: GroupState, seq: int, item: int, partition_key: str | None, now_ms: int) -> bool:
    """Record the key of a fresh message about to be leased. True when it must wait instead: it was
    added to `pending` as waiting (due now, not leased) behind an earlier entry with its key."""
    tag = key_tag(partition_key)
    if tag is None:
        return False
    held = tag in _held_tags(state)
    state.keys[seq] = tag
    if held:
        state.pending[seq] = Pending(item=item, due_ms=now_ms, attempts=0, leased=False)
    return held


def deliverable(state: GroupState, due: list[int]) -> list[int]:
    """The due sequences (ascending) that are first in line for their key; the others stay put."""
    first_pending: dict[str, int] = {}
    for seq in sorted(state.pending):
        tag = state.keys.get(seq)
        if tag is not None and tag not in first_pending:
            first_pending[tag] = seq
    return [seq for seq in due if state.keys.get(seq) is None or first_pending[state.keys[seq]] == seq]
