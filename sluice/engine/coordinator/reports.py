"""What a coordinator run reports: per pass, and per queue within a pass (the handler turns these into
metrics and logs). Multi-region: a queue's figures are the coordinator's region's; the home region's
coordinator also reports the queue over every region (`Figures.total` of each region's last pass)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# A queue whose demand is at least this share of its open shards' write ceiling keeps the coordinator
# passing every tick (half the policy's 0.7 target: room to see growth coming before it throttles).
BUSY_UTILIZATION = 0.35


@dataclass(frozen=True)
class Figures:
    """A queue's health in one region (or summed over regions): what the metrics carry."""

    open_shards: int = 0
    backlog: dict[str, int] = field(default_factory=dict)  # per consumer group
    writes_per_s: float = 0.0
    oldest_message_age_s: float = 0.0

    @property
    def total_backlog(self) -> int:
        return max(self.backlog.values(), default=0)

    def to_doc(self) -> dict[str, Any]:
        return {
            "o": self.open_shards,
            "b": self.backlog,
            "w": self.writes_per_s,
            "a": self.oldest_message_age_s,
        }

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Figures:
        return cls(int(doc["o"]), {g: int(n) for g, n in doc["b"].items()}, float(doc["w"]), float(doc["a"]))

    @classmethod
    def total(cls, parts: Iterable[Figures]) -> Figures:
        """Over regions: shards, backlogs and rates add up; the oldest message is the oldest anywhere."""
        parts = list(parts)
        backlog: dict[str, int] = {}
        for part in parts:
            for group, count in part.backlog.items():
                backlog[group] = backlog.get(group, 0) + count
        return cls(
            open_shards=sum(p.open_shards for p in parts),
            backlog=backlog,
            writes_per_s=sum(p.writes_per_s for p in parts),
            oldest_message_age_s=max((p.oldest_message_age_s for p in parts), default=0.0),
        )


@dataclass
class QueueReport:
    queue: str
    region: str | None = None  # the coordinator's region (None: single region); the figures are its shards'
    open_shards: int = 0
    sealed_shards: int = 0
    backlog: dict[str, int] = field(default_factory=dict)  # per consumer group
    oldest_message_age_s: float = 0.0
    writes_per_s: float = 0.0  # messages/s over the last period
    throttles_per_s: float = 0.0
    unreadable: list[int] = field(default_factory=list)  # shards whose HEAD read stayed throttled
    added: list[int] = field(default_factory=list)
    sealed: list[int] = field(default_factory=list)
    retired: list[int] = field(default_factory=list)
    push_workers_started: int = 0
    shard_work: list[dict[str, Any]] = field(default_factory=list)  # ShardWorkEvent payloads sent
    reason: str = ""
    all_regions: Figures | None = None  # the home region's coordinator in a multi-region deployment
    utilization: float = 0.0  # demand over the open shards' write ceiling, this pass
    lane_ceilings: dict[str, int] = field(default_factory=dict)  # "<shard>/<group>" -> ceiling raised to

    @property
    def busy(self) -> bool:
        """Worth another pass within seconds: load near what the open shards take, throttles, a map
        change in progress, push workers to keep up, pullers pressing on their lanes. Otherwise the
        minute rule's pass is soon enough."""
        return bool(
            self.utilization >= BUSY_UTILIZATION
            or self.throttles_per_s
            or self.unreadable
            or self.added
            or self.sealed
            or self.push_workers_started
            or self.lane_ceilings
        )

    @property
    def total_backlog(self) -> int:
        return max(self.backlog.values(), default=0)

    def figures(self) -> Figures:
        return Figures(self.open_shards, dict(self.backlog), self.writes_per_s, self.oldest_message_age_s)


@dataclass
class RunReport:
    holder: str
    acted: bool
    token: int | None = None
    message: str = ""
    queues: list[QueueReport] = field(default_factory=list)
    region: str | None = None
    failed: list[str] = field(default_factory=list)  # queues whose pass raised (logged; the rest ran)

    @property
    def busy(self) -> bool:
        return any(q.busy for q in self.queues)

    @property
    def throttled(self) -> bool:
        return any(q.throttles_per_s or q.unreadable for q in self.queues)

    pruned: list[str] = field(default_factory=list)  # deleted queues whose lingering mirror was removed
