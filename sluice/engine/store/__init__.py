"""The shard store: the one owner of a shard's items (see port.py for the operations)."""

from sluice.engine.store.items import (
    Allocation,
    AllocationRefused,
    BatchItem,
    ClaimRefused,
    Head,
    HeadCounts,
    HeadGuard,
    InlinePayload,
    LaneAddress,
    LaneRead,
    ObjectPayload,
    Payload,
    ShardAddress,
    ShardView,
    SlotTaken,
    StateConflict,
)
from sluice.engine.store.port import ShardStore

__all__ = [
    "Allocation",
    "AllocationRefused",
    "BatchItem",
    "ClaimRefused",
    "Head",
    "HeadCounts",
    "HeadGuard",
    "InlinePayload",
    "LaneAddress",
    "LaneRead",
    "ObjectPayload",
    "Payload",
    "ShardAddress",
    "ShardStore",
    "ShardView",
    "SlotTaken",
    "StateConflict",
]
