"""What a coordinator run reports: per pass, and per queue within a pass (the handler turns these into
metrics and logs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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

    @property
    def total_backlog(self) -> int:
        return max(self.backlog.values(), default=0)


@dataclass
class RunReport:
    holder: str
    acted: bool
    token: int | None = None
    message: str = ""
    queues: list[QueueReport] = field(default_factory=list)
    region: str | None = None
