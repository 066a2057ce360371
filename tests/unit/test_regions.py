"""Which shards a send or a pull uses in a multi-region deployment, the per-region breaker, and the
remote-region client configuration (no AWS calls)."""

from __future__ import annotations

import botocore.session
import pytest

from sluice import errors
from sluice.adapters import aws
from sluice.engine import regions
from sluice.engine.backend import Backend
from sluice.models import Queue, QueueSettings, Shard
from sluice.settings import Settings

HOME, AWAY, THIRD = "us-east-1", "eu-west-1", "ap-southeast-2"


def backend(region: str | None, all_regions: list[str] | None = None) -> Backend:
    every = [HOME, AWAY, THIRD] if all_regions is None else all_regions
    return Backend.from_settings(
        Settings(
            control_table="control",
            shard_tables=["shards-0", "shards-1"],
            segment_bucket=f"segments-{region}",
            shard_map_prefix="/maps",
            regions=every,
            region=region,
            segment_buckets={r: f"segments-{r}" for r in every},
        )
    )


def queue(*shards: Shard, ordered: bool = False) -> Queue:
    return Queue(
        name="q",
        settings=QueueSettings(ordered=ordered),
        created_ms=0,
        incarnation="abcd",
        shards=list(shards),
    )


def shard(shard_id: int, region: str | None, state: str = "open") -> Shard:
    return Shard(id=shard_id, table=shard_id % 2, created_ms=0, region=region, state=state)  # type: ignore[arg-type]


def test_a_send_uses_only_its_own_regions_open_shards():
    q = queue(shard(0, HOME), shard(1, AWAY), shard(2, AWAY), shard(3, AWAY, "sealed"), shard(4, THIRD))
    assert [s.id for s in regions.send_shards(backend(AWAY), q)] == [1, 2]
    assert [s.id for s in regions.send_shards(backend(HOME), q)] == [0]


def test_a_region_without_open_shards_sends_to_the_others():
    q = queue(shard(0, HOME), shard(1, AWAY, "sealed"))
    assert [s.id for s in regions.send_shards(backend(AWAY), q)] == [0]
    assert regions.send_shards(backend(AWAY), queue(shard(0, HOME, "sealed"))) == []


def test_keys_live_in_the_home_region_and_a_shard_without_region_is_home():
    q = queue(shard(0, None), shard(1, AWAY), shard(2, HOME), ordered=True)
    for where in (HOME, AWAY, THIRD):
        assert [s.id for s in regions.key_shards(backend(where), q)] == [0, 2]


def test_single_region_uses_every_open_shard_for_sends_and_keys():
    single = Backend.from_settings(
        Settings(control_table="c", shard_tables=["s"], segment_bucket="b", shard_map_prefix="/m")
    )
    q = queue(shard(0, None), shard(1, None), shard(2, None, "sealed"))
    assert [s.id for s in regions.send_shards(single, q)] == [0, 1]
    assert [s.id for s in regions.key_shards(single, q)] == [0, 1]
    assert regions.by_region(single, q.shards) == [(None, q.shards)]


def test_pull_order_is_own_region_first_then_the_deployments_order():
    shards = [shard(0, HOME), shard(1, THIRD), shard(2, AWAY), shard(3, None)]
    grouped = regions.by_region(backend(THIRD), shards)
    assert [(r, [s.id for s in group]) for r, group in grouped] == [(THIRD, [1]), (HOME, [0, 3]), (AWAY, [2])]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_breaker_skips_a_failed_region_for_its_cool_down_only():
    clock = Clock()
    breaker = regions.RegionBreaker(cooldown_s=5, clock=clock)
    with pytest.raises(errors.DependencyUnavailable), breaker.guard(AWAY):
        raise errors.DependencyUnavailable("unreachable")
    assert not breaker.allows(AWAY) and breaker.allows(HOME)
    with pytest.raises(errors.DependencyUnavailable):
        breaker.check(AWAY)
    clock.now += 4.9
    assert not breaker.allows(AWAY)
    clock.now += 0.2
    assert breaker.allows(AWAY)
    breaker.check(AWAY)


def test_breaker_ignores_other_errors_and_never_skips_a_single_region():
    breaker = regions.RegionBreaker(clock=Clock())
    with pytest.raises(errors.Throttled), breaker.guard(AWAY):
        raise errors.Throttled("slow down")
    assert breaker.allows(AWAY)
    with pytest.raises(errors.DependencyUnavailable), breaker.guard(None):
        raise errors.DependencyUnavailable("down")
    assert breaker.allows(None)


def test_breaker_key_is_none_in_a_single_region_deployment():
    single = Backend.from_settings(
        Settings(control_table="c", shard_tables=["s"], segment_bucket="b", shard_map_prefix="/m")
    )
    assert regions.region_key(single, shard(0, None)) is None
    assert regions.region_key(backend(AWAY), shard(0, None)) == HOME


def test_other_regions_clients_get_a_short_connect_timeout_and_few_attempts(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", HOME)
    monkeypatch.delenv("AWS_REGION", raising=False)
    session = botocore.session.get_session()
    assert aws.config_for(session, None) is aws.RETRY_CONFIG
    assert aws.config_for(session, HOME) is aws.RETRY_CONFIG
    remote = aws.config_for(session, AWAY)
    assert remote is aws.REMOTE_CONFIG
    assert remote.connect_timeout <= 1 < aws.RETRY_CONFIG.connect_timeout
    # one attempt, bounded: the breaker and the caller's next poll retry (`max_attempts` counts retries)
    assert remote.retries["total_max_attempts"] == 1
    assert remote.connect_timeout + remote.read_timeout == aws.REMOTE_CALL_SECONDS <= 3
