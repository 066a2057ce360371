"""What the coordinator keeps between passes, per queue (`COORDINATOR` / `STATE#<queue>`): the counters of
the previous pass (rates are deltas against them), when the load went low, when the SSM mirror was last
checked, and the shard-work plan's cadence marks. Built once per pass and written once. Each region's
coordinator keeps its own (`STATE#<region>#<queue>`): its shards, its mirror, its cadence."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.adapters.dynamo import Table
from sluice.engine import keys
from sluice.engine.coordinator.reports import Figures
from sluice.models import Queue

_AT, _COUNTS, _LOW, _MIRROR, _FIGURES = "at", "c", "low", "mir", "fig"  # the saved document's keys (stable)


@dataclass(frozen=True)
class SavedState:
    at: int | None = None  # when the previous pass ran (ms)
    counts: Mapping[str, list[int]] = field(default_factory=dict)  # shard id → HEAD counters
    low_since_ms: int | None = None
    mirror_checked_at: int = 0
    cadence: Mapping[str, Any] = field(default_factory=dict)  # sluice.engine.workplan's marks
    figures: Figures | None = None  # what the pass reported (read by the home region's coordinator)

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> SavedState:
        known = {_AT, _COUNTS, _LOW, _MIRROR, _FIGURES}
        return cls(
            at=doc.get(_AT),
            counts=doc.get(_COUNTS, {}),
            low_since_ms=doc.get(_LOW),
            mirror_checked_at=int(doc.get(_MIRROR, 0)),
            cadence={k: v for k, v in doc.items() if k not in known},
            figures=Figures.from_doc(doc[_FIGURES]) if doc.get(_FIGURES) else None,
        )

    def to_doc(self) -> dict[str, Any]:
        doc = {**self.cadence, _AT: self.at, _COUNTS: dict(self.counts), _LOW: self.low_since_ms}
        if self.mirror_checked_at:
            doc[_MIRROR] = self.mirror_checked_at
        if self.figures is not None:
            doc[_FIGURES] = self.figures.to_doc()
        return doc


class StateStore:
    """The saved state of one region's coordinator (`region` None: the single-region one)."""

    def __init__(self, control: Table, region: str | None = None) -> None:
        self.table = control
        self.region = region

    def in_region(self, region: str) -> StateStore:
        """Another region's coordinator state (the home coordinator reads their figures)."""
        return StateStore(self.table, region)

    def load(self, queue: Queue) -> SavedState:
        """The previous pass's state; a fresh one for a queue made again (another incarnation)."""
        item = self.table.get(keys.COORDINATOR_PK, keys.coordinator_state_sk(queue.name, self.region))
        if not item or item.get(keys.INCARNATION) != queue.incarnation:
            return SavedState()
        return SavedState.from_doc(json.loads(item[keys.DOC]))

    def save(self, queue: Queue, state: SavedState) -> None:
        self.table.put(
            {
                keys.PK: keys.COORDINATOR_PK,
                keys.SK: keys.coordinator_state_sk(queue.name, self.region),
                keys.INCARNATION: queue.incarnation,
                keys.DOC: json.dumps(state.to_doc(), separators=(",", ":")),
            }
        )
