"""The coordinator's configuration, and how it starts other functions."""

from __future__ import annotations

__all__ = ["CoordinatorConfig", "Invoker"]

from dataclasses import dataclass, field, replace

from sluice import constants as c
from sluice.engine import keys
from sluice.engine.invoker import Invoker
from sluice.engine.scaling import ScalingPolicy
from sluice.engine.workplan import ShardWorkPolicy
from sluice.settings import CoordinatorSettings


@dataclass
class CoordinatorConfig:
    policy: ScalingPolicy = field(default_factory=ScalingPolicy)
    work: ShardWorkPolicy = field(default_factory=ShardWorkPolicy)
    ownership_ms: int = 60_000  # how long one pass runner owns the coordinator item between renewals
    period_s: float = c.DEFAULT_COORDINATOR_TICK_SECONDS  # between passes of one run
    loop_s: float = 0.0  # how long one scheduled run keeps passing (the stack sets rule period - tick)
    shard_function: str | None = None
    consumer_function: str | None = None
    push_batches_per_worker: int = 4  # k in workers = min(max_concurrency, ceil(backlog / batch / k))
    # The ownership item's sort key under COORDINATOR (tests isolate by it); one item per region
    # (`keys.coordinator_ownership_sk`).
    ownership_sk: str = keys.COORDINATOR_OWNERSHIP_SK
    queues: list[str] | None = None  # only these queues (tests); None: every queue
    # How often a region's coordinator lists its SSM path for mirrors of deleted queues (one
    # GetParametersByPath per 10 parameters, on the quota brokers share).
    prune_every_ms: int = 600_000

    @classmethod
    def from_settings(cls, settings: CoordinatorSettings) -> CoordinatorConfig:
        s = settings
        policy = ScalingPolicy()
        if s.shard_wcu_ceiling:
            policy = replace(policy, shard_wcu_ceiling=s.shard_wcu_ceiling)
        if s.scale_down_after_seconds:
            policy = replace(policy, scale_down_after_ms=int(s.scale_down_after_seconds * 1000))
        work = ShardWorkPolicy()
        if s.shard_flush_seconds:
            work = replace(work, flush_every_ms=int(s.shard_flush_seconds * 1000))
        if s.shard_maintenance_seconds:
            work = replace(work, maintenance_every_ms=int(s.shard_maintenance_seconds * 1000))
        config = cls(
            policy=policy,
            work=work,
            shard_function=s.shard_function or None,
            consumer_function=s.consumer_function or None,
        )
        if s.period_seconds:
            config.period_s = s.period_seconds
        if s.loop_seconds:
            config.loop_s = s.loop_seconds
        if s.lease_seconds:
            config.ownership_ms = int(s.lease_seconds * 1000)
        return config
