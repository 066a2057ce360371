"""The pure scaling policy: the same function the coordinator and the scale simulator call."""

from sluice.engine.scaling import QueueObservation, ScalingPolicy, ShardObservation, decide

POLICY = ScalingPolicy(shard_wcu_ceiling=1000, target_utilization=0.7, scale_down_after_ms=60_000)


def obs(shards, now=1_000_000, low_since=None, min_shards=1, max_shards=64, ordered=False):
    return QueueObservation("q", min_shards, max_shards, shards, now, ordered, low_since)


def busy(sid, requests, throttles=0.0, state="open"):
    # 100 messages of 200 B per request: 2 + 19.5 WCU per request
    return ShardObservation(sid, state, requests, requests * 100, requests * 20_000, throttles)


def test_quiet_queue_keeps_its_shard():
    d = decide(obs([busy(0, 1)]), POLICY)
    assert (d.add, d.seal, d.retire) == (0, [], [])


def test_load_near_the_ceiling_adds_shards_to_the_target_utilization():
    # 4 shards at ~95% of the ceiling: demand 4 x 43 x 21.5 WCU/s ~ 3,700 → 6 shards at 70%
    d = decide(obs([busy(i, 43) for i in range(4)]), POLICY)
    assert d.add == 2 and d.desired_open == 6


def test_throttles_count_as_unmet_demand_and_growth_is_capped():
    # one shard saturated, throttled 20x over: demand ~ 21x capacity, but at most x4 per decision
    d = decide(obs([busy(0, 45, throttles=900)]), POLICY)
    assert d.add == 3 and d.desired_open == 4
    # four saturated: 3,900 WCU/s taken + 100 throttled sends/s x 21.5 each = 18 shards at 70 %; the
    # counts run high (retries), so the geometric mean of 4 and 18
    d = decide(obs([busy(i, 45, throttles=100) for i in range(4)]), POLICY)
    assert d.desired_open == 9


def test_below_the_ceiling_throttles_are_retries_not_more_demand():
    # 10 shards at ~50 %: the throttled sends come back as retries the shards take; one more shard only
    d = decide(obs([busy(i, 23, throttles=10) for i in range(10)]), POLICY)
    assert d.desired_open == 11


def test_light_throttling_grows_at_most_x4():
    # 5 % of requests throttled on shards at ~65 % of the ceiling: not heavy; one more shard at least
    d = decide(obs([busy(i, 30, throttles=1.5) for i in range(4)]), POLICY)
    assert d.desired_open == 5


def test_any_throttle_adds_at_least_one_shard():
    d = decide(obs([busy(0, 1, throttles=0.1)]), POLICY)
    assert d.add == 1


def test_max_shards_caps_and_min_shards_floors():
    assert decide(obs([busy(0, 45, throttles=900)], max_shards=2), POLICY).desired_open == 2
    assert decide(obs([busy(0, 0)], min_shards=3), POLICY).add == 2


def test_idle_shards_are_sealed_only_after_the_load_stayed_low():
    shards = [busy(i, 0.5) for i in range(6)]
    first = decide(obs(shards, now=0), POLICY)
    assert first.seal == [] and first.low_since_ms == 0
    early = decide(obs(shards, now=30_000, low_since=0), POLICY)
    assert early.seal == [] and early.low_since_ms == 0
    late = decide(obs(shards, now=61_000, low_since=0, min_shards=2), POLICY)
    assert late.seal == [2, 3, 4, 5]  # down to min_shards, newest first
    # a burst in between resets the timer
    burst = decide(obs([busy(i, 40) for i in range(6)], now=61_000, low_since=0), POLICY)
    assert burst.seal == [] and burst.low_since_ms is None


def test_hysteresis_keeps_shards_at_moderate_load():
    # 10 shards at 40% of the ceiling: fits 6 at 70%, but 40% > 30% low-water mark → no sealing
    d = decide(obs([busy(i, 18.6) for i in range(10)], now=10**9, low_since=0), POLICY)
    assert d.seal == []


def test_retire_needs_sealed_head_drained_and_flushed():
    shards = [
        busy(0, 1),
        ShardObservation(1, "sealed", head_sealed=True, drained=True, flushed=True),
        ShardObservation(2, "sealed", head_sealed=False, drained=True, flushed=True),
        ShardObservation(3, "sealed", head_sealed=True, drained=False, flushed=True),
        ShardObservation(4, "sealed", head_sealed=True, drained=True, flushed=False),
    ]
    assert decide(obs(shards), POLICY).retire == [1]


def test_ordered_queues_do_not_reshard():
    d = decide(obs([busy(0, 45, throttles=900)], ordered=True), POLICY)
    assert d.add == 0


def test_saturated_shards_with_throttles_grow_at_least_x2():
    # every open shard at ~97% of the ceiling and a few throttles surfaced: the counts lag, so at least x2
    d = decide(obs([busy(i, 45, throttles=0.5) for i in range(2)]), POLICY)
    assert d.desired_open == 4


def unreadable(sid):
    return ShardObservation(sid, "open", unreadable=True)


def test_shards_whose_head_read_was_throttled_count_as_saturated():
    # The coordinator's HEAD read of every open shard stayed throttled: no rates, but saturated
    # partitions, the load the counters cannot size: x4 at once.
    d = decide(obs([unreadable(0)]), POLICY)
    assert d.desired_open == 4 and d.demand_wcu_per_s == 1000
    # Mixed with shards read at >= 90 % and throttled: every open shard saturated, and an estimate (the
    # unreadable one at the ceiling): at least x2.
    d = decide(obs([unreadable(0), busy(1, 45, throttles=1)]), POLICY)
    assert d.desired_open == 4
    # One hot shard among idle readable ones: its full ceiling is demand, and at least one more shard.
    d = decide(obs([unreadable(0), *(busy(i, 1) for i in range(1, 4))]), POLICY)
    assert d.desired_open == 5
    # An unreadable shard never lets the queue shrink.
    d = decide(obs([unreadable(0), *(busy(i, 0) for i in range(1, 8))], low_since=0), POLICY)
    assert d.seal == [] and d.low_since_ms is None


def test_lane_ceiling_rises_to_what_the_backlog_feeds_under_consumer_pressure():
    from sluice.engine.scaling import LaneObservation, lane_ceiling

    policy = ScalingPolicy()  # fed lanes: unclaimed / (4 batches of 100)
    assert lane_ceiling(LaneObservation(32, 32, 32, 40_000), policy) == 100
    assert lane_ceiling(LaneObservation(32, 32, 30, 400_000), policy) == 256  # capped
    assert lane_ceiling(LaneObservation(100, 100, 95, 80_000), policy) == 200  # again on the next pass


def test_lane_ceiling_stays_without_consumer_pressure():
    from sluice.engine.scaling import LaneObservation, lane_ceiling

    policy = ScalingPolicy()
    assert lane_ceiling(LaneObservation(32, 20, 20, 400_000), policy) == 32  # pullers did not reach it
    assert lane_ceiling(LaneObservation(32, 32, 10, 400_000), policy) == 32  # most lanes idle: few pullers
    assert lane_ceiling(LaneObservation(32, 32, 32, 10_000), policy) == 32  # the backlog feeds no more
    assert (
        lane_ceiling(LaneObservation(128, 128, 128, 1_000), policy) == 128
    )  # never lowered here: a merge does
