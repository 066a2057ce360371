"""The scale simulator runs the real policy: a queue takes ≥ 100,000 msg/s and shrinks back after."""

from bench.scale_sim import ramp_profile, run


def test_simulated_queue_sustains_100k_and_returns_to_one_shard():
    result = run(ramp_profile(high=150_000, warm=30, up=90, hold=120, idle=120))
    assert result["sustained_msgs_per_s"] >= 100_000
    assert result["throttle_ratio_at_peak"] < 0.01
    assert result["max_shards"] > 30 and result["final_shards"] == 1


def test_the_simulator_runs_the_deployed_coordinator_tick():
    import inspect

    from bench.scale_sim import DEPLOYED_PERIOD_S
    from sluice import constants as c

    assert DEPLOYED_PERIOD_S == c.DEFAULT_COORDINATOR_TICK_SECONDS
    assert inspect.signature(run).parameters["period_s"].default == DEPLOYED_PERIOD_S
