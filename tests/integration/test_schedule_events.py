"""Typed events on the receiving side and the coordinator's loop inside one scheduled run: the handlers
parse `sluice.events` models with Powertools' parser, refuse anything else; at rest a run is one short
pass, under load the coordinator keeps deciding every tick until the configured loop ends, always before
the function's timeout."""

from __future__ import annotations

import threading
import time

import pytest
from pydantic import ValidationError

from sluice import constants as c
from sluice.engine.coordinator import Coordinator, CoordinatorConfig
from sluice.engine.scaling import ScalingPolicy
from sluice.local.workers import LocalContext
from sluice.models import OutgoingMessage
from sluice.settings import CoordinatorSettings
from tests.integration.test_coordinator import RecordingInvoker


def test_cadence_environment_configures_the_coordinator():
    config = CoordinatorConfig.from_settings(
        CoordinatorSettings.from_env(
            {
                c.ENV_COORDINATOR_PERIOD_SECONDS: "2",
                c.ENV_COORDINATOR_LOOP_SECONDS: "58",
                c.ENV_SHARD_FLUSH_SECONDS: "30",
                c.ENV_SHARD_MAINTENANCE_SECONDS: "90",
            }
        )
    )
    assert (config.period_s, config.loop_s) == (2.0, 58.0)
    assert (config.work.flush_every_ms, config.work.maintenance_every_ms) == (30_000, 90_000)
    defaults = CoordinatorConfig.from_settings(CoordinatorSettings.from_env({}))
    assert (defaults.period_s, defaults.loop_s) == (c.DEFAULT_COORDINATOR_TICK_SECONDS, 0.0)


@pytest.fixture
def scheduled_coordinator(engine, queue_name, monkeypatch):
    """The handler's coordinator, configured from the environment as deployed, on one queue."""
    from lambdas.coordinator import handler

    engine.queues.create(queue_name)
    env = {c.ENV_COORDINATOR_PERIOD_SECONDS: "0.25", c.ENV_COORDINATOR_LOOP_SECONDS: "1.0"}
    config = CoordinatorConfig.from_settings(CoordinatorSettings.from_env(env))
    config.queues, config.ownership_sk = [queue_name], f"LEASE-{queue_name}"
    config.shard_function = "shard"
    invoker = RecordingInvoker()
    coord = Coordinator(engine.backend, engine.queues, invoker, config)
    monkeypatch.setattr(handler, "coordinator", lambda: coord)
    return handler, invoker


def test_at_rest_a_scheduled_run_is_one_short_pass(scheduled_coordinator):
    handler, invoker = scheduled_coordinator
    started = time.monotonic()
    result = handler.lambda_handler({"kind": "coordinator.run"}, LocalContext(c.FN_COORDINATOR, 70))
    assert time.monotonic() - started < 1.0  # the loop would run 1 s
    assert result["passes"] == result["acted"] == 1
    assert invoker.shard_work()  # the pass sent maintenance for the queue's shard


def test_under_load_a_scheduled_run_passes_every_tick_for_the_loop(scheduled_coordinator, engine, queue_name):
    handler, _ = scheduled_coordinator
    coord = handler.coordinator()
    coord.config.policy = ScalingPolicy(shard_wcu_ceiling=1.0)  # a few sends a second keep it busy
    engine.queues.update_settings(queue_name, {"max_shards": 1})
    handler.lambda_handler({"kind": "coordinator.run"}, LocalContext(c.FN_COORDINATOR, 70))  # snapshot
    stop = threading.Event()

    def produce() -> None:
        while not stop.is_set():
            engine.publisher.publish(queue_name, [OutgoingMessage(body=b'"x"')])
            time.sleep(0.02)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        time.sleep(0.1)
        started = time.monotonic()
        result = handler.lambda_handler({"kind": "coordinator.run"}, LocalContext(c.FN_COORDINATOR, 70))
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        producer.join()
    assert 1.0 <= elapsed < 5.0
    assert 3 <= result["passes"] <= 5 and result["acted"] == result["passes"]  # 1 s of 0.25 s ticks


def test_the_loop_ends_before_the_function_timeout(scheduled_coordinator):
    handler, _ = scheduled_coordinator
    timeout = handler.SAFETY_SECONDS + 0.5  # less time left than the loop wants
    started = time.monotonic()
    result = handler.lambda_handler(
        {"kind": "coordinator.run", "loop_seconds": 30}, LocalContext("c", timeout)
    )
    assert time.monotonic() - started < timeout - handler.SAFETY_SECONDS + 3  # one pass past the cap
    assert result["passes"] >= 1


def test_event_overrides_are_typed(scheduled_coordinator):
    handler, _ = scheduled_coordinator
    result = handler.lambda_handler(
        {"kind": "coordinator.run", "loop_seconds": 0}, LocalContext(c.FN_COORDINATOR, 70)
    )
    assert result["passes"] == 1
    # An EventBridge envelope (a rule without our input) or a wrong value: refused, no pass.
    for bad in ({"kind": "coordinator.run", "loop_seconds": -1}, {"source": "aws.events", "detail": {}}):
        with pytest.raises(ValidationError):
            handler.lambda_handler(bad, LocalContext(c.FN_COORDINATOR, 70))


@pytest.mark.parametrize(
    "event",
    [
        {"push": {"queue": "q", "consumer_id": "c", "slot": -1}},
        {"push": {"queue": "q"}},
        {"kind": "push.worker", "push": {"queue": "q", "consumer_id": "c"}, "extra": 1},
    ],
)
def test_the_consumer_refuses_a_malformed_push_event(settings, event):
    from lambdas.consumer.handler import lambda_handler

    with pytest.raises(ValidationError):
        lambda_handler(event, LocalContext(c.FN_CONSUMER, 30))


def test_the_looping_coordinator_checks_the_ssm_mirror_every_10_minutes(clocked, clock, queue_name):
    """A pass every tick must not read SSM every tick (GetParameter has a low throughput quota): a
    lagging mirror is repaired on the first pass, then checked again `MIRROR_CHECK_EVERY_MS` later."""
    from sluice.engine.coordinator import MIRROR_CHECK_EVERY_MS
    from sluice.local import moto_patches

    clocked.queues.create(queue_name)
    config = CoordinatorConfig(queues=[queue_name], ownership_sk=f"LEASE-{queue_name}")
    coord = Coordinator(clocked.backend, clocked.queues, None, config)
    current = clocked.queues.get(queue_name)
    stale = current.model_copy(update={"version": current.version - 1}).model_dump_json()
    clocked.backend.mirror.write(queue_name, stale)
    coord.run_once()
    assert clocked.backend.mirror.read(queue_name) != stale  # repaired on the first pass
    moto_patches.refill_ssm_quota()  # (PutParameter: 3 a second) as if a second had passed
    clocked.backend.mirror.write(queue_name, stale)
    clock.advance(c.DEFAULT_COORDINATOR_TICK_SECONDS * 1000)
    coord.run_once()
    assert clocked.backend.mirror.read(queue_name) == stale  # not re-read on every tick
    clock.advance(MIRROR_CHECK_EVERY_MS)
    moto_patches.refill_ssm_quota()
    coord.run_once()
    assert clocked.backend.mirror.read(queue_name) != stale
