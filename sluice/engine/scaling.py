"""The coordinator's scaling policy: a pure function from observed shard rates to shard-map decisions.

No I/O here: the coordinator (`sluice.engine.coordinator`) and the scale simulator (`bench/scale_sim.py`)
call the same `decide`, so what the simulator shows is what the deployed coordinator does.

Load is measured in DynamoDB write units per second on each shard's partition key, the quantity
DynamoDB limits (1,000 WCU/s per partition). From a shard's counters:
`wcu/s = 2 x requests/s (head update + ≥ 1 WCU item put) + bytes/s / 1024 + conflicts/s` — a failed
conditional write still costs a write unit. Throttled attempts are unmet demand: each is counted at the
shard's average write units per request. A shard whose HEAD the coordinator could not read (throttled
on every retry) is saturated: it counts as a full ceiling of load with throttles seen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sluice.engine.lanes import CEILING_MAX, ITEM_SPAN, fed_lanes

WCU_BYTES = 1024


@dataclass(frozen=True)
class ScalingPolicy:
    shard_wcu_ceiling: float = 1000.0  # what one partition key takes
    target_utilization: float = 0.7  # aim open shards at this share of the ceiling (headroom for skew)
    low_utilization: float = 0.3  # shrink only when the load would fit in the smaller set at this share
    max_growth: float = 4.0  # at most x this many open shards per decision (throttle counts overshoot)
    scale_down_after_ms: int = 60_000  # the load must stay low this long before shards are sealed
    throttle_tolerance: float = 0.01  # throttled/requests above this force at least one more shard
    # A load the counters cannot size: every open shard running at `saturated` of the ceiling (or its
    # HEAD unreadable) while throttles are seen. Its demand is the taken load plus the throttled sends
    # (a broker counts each refused send once, whatever shards it tried, and drops counts older than 2 s:
    # sluice/engine/counters.py), and the open shards grow at least x `heavy_growth`. Below the ceiling
    # the shards take what is sent, so throttles there are retries, not demand: only the taken load is
    # sized (and one more shard). The twin (bench/twin) showed x8 steps overshooting a 1,000 -> 100,000
    # msg/s step to 128 shards where ~31 do; x4 with these counts reaches 49.
    saturated: float = 0.9
    heavy_growth: float = 4.0
    heavy_min_growth: float = 2.0  # when every saturated shard could be read (its throttles are counted)
    default_request_wcu: float = 22.0  # for throttles on a shard that accepted nothing yet (100 x 200 B)
    # Consumer pressure (`lane_ceiling`): a group's lanes on a shard all committed within `lane_busy_ms`
    # (at least `lane_busy_share` of them) while at their ceiling and fed by the unclaimed backlog.
    lane_busy_ms: int = 1_000
    lane_busy_share: float = 0.9
    lane_ceiling_max: int = CEILING_MAX
    lane_batch: int = ITEM_SPAN  # the pullers' batch the backlog is counted in (a full batch item)


@dataclass(frozen=True)
class ShardObservation:
    """One shard as the coordinator saw it: rates since its last run and the retirement conditions."""

    id: int
    state: str  # open | sealed
    requests_per_s: float = 0.0
    messages_per_s: float = 0.0
    bytes_per_s: float = 0.0
    throttles_per_s: float = 0.0
    conflicts_per_s: float = 0.0
    head_sealed: bool = False  # the HEAD item refuses allocations (the next sequence is final)
    drained: bool = False  # every consumer group's ack level reached the head's next sequence
    flushed: bool = True  # bottomless queues: every sequence is in an S3 segment
    unreadable: bool = False  # the HEAD read was throttled on every retry: no rates, a saturated partition

    @property
    def wcu_per_s(self) -> float:
        return 2 * self.requests_per_s + self.bytes_per_s / WCU_BYTES + self.conflicts_per_s

    @property
    def wcu_per_request(self) -> float | None:
        return self.wcu_per_s / self.requests_per_s if self.requests_per_s > 0 else None


@dataclass(frozen=True)
class QueueObservation:
    name: str
    min_shards: int
    max_shards: int
    shards: list[ShardObservation]
    now_ms: int
    ordered: bool = False
    low_since_ms: int | None = None  # carried between runs: since when the load has been low


@dataclass
class Decision:
    add: int = 0
    seal: list[int] = field(default_factory=list)
    retire: list[int] = field(default_factory=list)
    desired_open: int = 0
    demand_wcu_per_s: float = 0.0
    low_since_ms: int | None = None
    reason: str = ""

    @property
    def changes_map(self) -> bool:
        return bool(self.add or self.seal or self.retire)


def demand_wcu(shards: list[ShardObservation], policy: ScalingPolicy) -> tuple[float, float]:
    """(observed write units/s, unmet write units/s from throttled attempts) over `shards`."""
    observed = sum(policy.shard_wcu_ceiling if s.unreadable else s.wcu_per_s for s in shards)
    requests = sum(s.requests_per_s for s in shards)
    average = observed / requests if requests > 0 else policy.default_request_wcu
    unmet = sum(s.throttles_per_s * (s.wcu_per_request or average) for s in shards)
    return observed, unmet


def decide(obs: QueueObservation, policy: ScalingPolicy) -> Decision:
    """How many shards to add, which to seal, which sealed ones to retire."""
    open_shards = sorted((s for s in obs.shards if s.state == "open"), key=lambda s: s.id)
    sealed = [s for s in obs.shards if s.state == "sealed"]
    n_open = len(open_shards)
    decision = Decision(
        retire=sorted(s.id for s in sealed if s.head_sealed and s.drained and s.flushed),
        low_since_ms=obs.low_since_ms,
    )
    # Retiring drained shards can trail the load on every shard; it never changes the write capacity.
    observed, unmet = demand_wcu(open_shards, policy)
    demand = observed + unmet
    decision.demand_wcu_per_s = demand
    per_shard = policy.shard_wcu_ceiling * policy.target_utilization
    requests = sum(s.requests_per_s for s in open_shards)
    throttles = sum(s.throttles_per_s for s in open_shards)
    unreadable = any(s.unreadable for s in open_shards)
    throttled = unreadable or (throttles > 0 and throttles > policy.throttle_tolerance * requests)
    if obs.ordered:
        # A partition key's shard is a hash over the open shards: resharding would reorder keys.
        desired = n_open
        decision.reason = "ordered queue: shard count fixed between min_shards and max_shards"
    else:
        hot = [
            s.unreadable or s.wcu_per_s >= policy.saturated * policy.shard_wcu_ceiling for s in open_shards
        ]
        saturated = bool(hot) and all(hot)
        # Below the ceiling the open shards take what is sent: throttles there are retries of sends
        # refused a moment ago (or a burst on one shard), not more demand, so only the accepted load
        # is sized, and one more shard.
        desired = max(1, math.ceil(observed / per_shard)) if observed > 0 else 1
        growth = policy.max_growth
        if throttled:
            # A load that throttles is in transit: the retries clients held drain as soon as shards are
            # added, and the taken load runs high for a pass or two. Grow to the geometric mean of the
            # shards open and the shards it asks for (a second pass finishes the way if it was real).
            if desired > n_open > 0:
                desired = math.ceil(math.sqrt(n_open * desired))
            desired = max(desired, n_open + 1)
        if saturated and (throttles > 0 or unreadable):
            # Above the ceiling the demand is unknown. No HEAD could be read: x `heavy_growth`.
            # Otherwise the throttle counts estimate it (an unreadable shard at the ceiling), high (a
            # refused send comes back after its Retry-After, and the retries clients held drain as the
            # shards grow): go to the geometric mean of the shards open and the shards the estimate
            # asks for, at least x2.
            growth = max(growth, policy.heavy_growth)
            n = max(n_open, 1)
            if all(s.unreadable for s in open_shards):
                desired = max(desired, math.ceil(n * policy.heavy_growth))
            else:  # the taken load alone runs high too: retries held by clients drain at once
                asked = math.ceil(demand / per_shard)
                desired = max(n + 1, math.ceil(n * policy.heavy_min_growth), math.ceil(math.sqrt(n * asked)))
        desired = min(desired, max(n_open + 1, math.floor(max(n_open, 1) * growth)))
    desired = max(obs.min_shards, min(obs.max_shards, desired))
    decision.desired_open = desired

    if desired > n_open:
        decision.add = desired - n_open
        decision.low_since_ms = None
        decision.reason = decision.reason or (
            f"demand {demand:.0f} WCU/s ({unmet:.0f} throttled) needs {desired} shards, {n_open} open"
        )
        return decision
    if n_open > obs.max_shards:  # settings lowered: shrink at once
        decision.seal = [s.id for s in open_shards[desired:]]
        decision.reason = f"max_shards is {obs.max_shards}: sealing {len(decision.seal)}"
        return decision
    # Hysteresis: shrink only once the open shards run below `low_utilization`, then to `desired`.
    low = (
        desired < n_open
        and not throttles
        and not unreadable
        and demand <= n_open * policy.shard_wcu_ceiling * (policy.low_utilization)
    )
    if obs.ordered and n_open > obs.min_shards:
        low = False
    if not low:
        decision.low_since_ms = None
        decision.reason = decision.reason or f"{n_open} open shards fit demand {demand:.0f} WCU/s"
        return decision
    since = obs.low_since_ms if obs.low_since_ms is not None else obs.now_ms
    decision.low_since_ms = since
    if obs.now_ms - since < policy.scale_down_after_ms:
        decision.reason = f"load low for {(obs.now_ms - since) / 1000:.0f} s; waiting before sealing"
        return decision
    # Seal the newest shards (the busiest stay, keeping the pull fan-out of old shards short).
    decision.seal = [s.id for s in open_shards[desired:]]
    decision.low_since_ms = None
    decision.reason = f"demand {demand:.0f} WCU/s fits {desired} shards: sealing {decision.seal}"
    return decision


@dataclass(frozen=True)
class LaneObservation:
    """A consumer group split into lanes on one shard, as a pass saw it."""

    ceiling: int  # the lanes its pullers may widen to
    lanes: int  # the lanes that may claim now
    busy: int  # of those, the lanes committed within the policy's `lane_busy_ms`
    unclaimed: int  # sequences no lane has claimed yet


def lane_ceiling(obs: LaneObservation, policy: ScalingPolicy) -> int:
    """The group's lane ceiling on the shard after this pass. Consumer pressure: the pullers widened the
    lanes to the ceiling (lanes widen only on lost races), keep them busy, and the unclaimed backlog
    would feed more (at batches of `lane_batch`, as `lanes.wider` counts): the ceiling goes at once to what
    the backlog feeds, up to `lane_ceiling_max` (a drain lasts a few passes; pullers still widen only on
    their lost races). Otherwise it stays: a group whose lanes empty merges back to one lane, and the
    merge drops the ceiling to lanes.MAX_LANES."""
    if obs.lanes < obs.ceiling or obs.busy < policy.lane_busy_share * obs.lanes:
        return obs.ceiling
    return max(obs.ceiling, min(policy.lane_ceiling_max, fed_lanes(obs.unclaimed, policy.lane_batch)))
