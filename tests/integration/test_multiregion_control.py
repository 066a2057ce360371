"""The control plane across two regions on one moto (moto keeps regions apart): queue creation puts shards
in every region, every region's mirror is written and repaired, each region's coordinator scales only its
own shards under its own ownership and fencing token, and tokens are verified from the region's replica.

Moto has no global tables: the control table exists in both regions with the same name, unreplicated, so
a test puts an item into the replica itself where replication would have.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

import pytest
from botocore.exceptions import ClientError

from sluice import errors
from sluice.adapters import aws
from sluice.adapters.ssm import SsmMirror
from sluice.engine import keys, mapdoc
from sluice.engine.auth import TokenStore
from sluice.engine.backend import Backend
from sluice.engine.coordinator import Coordinator, CoordinatorConfig
from sluice.engine.queues import QueueRegistry
from sluice.engine.scaling import ScalingPolicy
from sluice.models import Queue
from sluice.settings import Settings
from tests.conftest import FakeClock
from tests.regions import regional_settings

HOME, AWAY = "us-east-1", "eu-west-1"
LEASE_MS = 30_000


@dataclass
class Region:
    backend: Backend
    queues: QueueRegistry

    def coordinator(self, queue_name: str, holder: str) -> Coordinator:
        config = CoordinatorConfig(
            policy=ScalingPolicy(shard_wcu_ceiling=10.0, scale_down_after_ms=5_000),
            ownership_ms=LEASE_MS,
            ownership_sk=f"LEASE-{queue_name}",
            queues=[queue_name],
        )
        return Coordinator(self.backend, self.queues, None, config, holder=holder)


@pytest.fixture(scope="module")
def deployment(aws: None) -> dict[str, Settings]:
    """Same-named control and shard tables (one shard table) in both regions, a bucket per region."""
    return regional_settings(f"mr{uuid.uuid4().hex[:6]}", (HOME, AWAY))


def aws_client(service: str, region: str):
    return aws.client(service, None, region)


@pytest.fixture
def regions(deployment: dict[str, Settings], clock: FakeClock) -> dict[str, Region]:
    out = {}
    for region, settings in deployment.items():
        backend = Backend.from_settings(settings, clock)
        out[region] = Region(backend, QueueRegistry(backend))
    return out


def mirror_in(settings: Settings, region: str) -> SsmMirror:
    return SsmMirror(settings.shard_map_prefix, None, region)


def load(region: Region, queue: Queue, requests: int, messages: int) -> None:
    """What publishes leave on a shard's HEAD (its write counters), on every open shard of the region."""
    for shard in queue.shards_in(region.backend.settings.region):
        if shard.state == "open":
            region.backend.table_for(shard).update(
                keys.shard_pk(queue, shard.id),
                keys.HEAD_SK,
                "ADD #r :r, #m :m, #b :b",
                names={"#r": keys.HEAD_COUNTERS[0], "#m": keys.HEAD_COUNTERS[1], "#b": keys.HEAD_COUNTERS[2]},
                values={":r": requests, ":m": messages, ":b": messages * 100},
            )


def test_a_queue_gets_min_shards_in_every_region_with_unique_ids(regions, queue_name):
    created = regions[AWAY].queues.create(
        queue_name, {"min_shards": 2, "dead_letter_queue": f"{queue_name}-dlq"}
    )
    assert [(s.id, s.region) for s in created.shards] == [(0, HOME), (1, HOME), (2, AWAY), (3, AWAY)]
    assert created.next_shard_id == 4
    # The document is in the home region's control table only (the away region's replica gets it by
    # replication, which moto does not do).
    assert regions[HOME].backend.control.get(keys.queue_pk(queue_name), keys.QUEUE_SK) is not None
    dlq = regions[HOME].queues.get(f"{queue_name}-dlq")
    assert [(s.region, s.state) for s in dlq.shards] == [(HOME, "open"), (AWAY, "open")]


def test_every_region_mirror_is_written_and_a_failed_one_is_repaired_by_its_coordinator(
    regions, deployment, queue_name, monkeypatch, caplog
):
    home, away = regions[HOME], regions[AWAY]
    created = home.queues.create(queue_name)
    for region in (HOME, AWAY):
        assert mapdoc.decode(mirror_in(deployment[region], region).read(queue_name)) == created

    def unreachable(*_args, **_kwargs):
        raise errors.DependencyUnavailable("SSM could not be reached; retry shortly")

    monkeypatch.setattr(home.backend.remote[AWAY].mirror, "write", unreachable)
    paused = home.queues.set_paused(queue_name, True)  # succeeds: the home item is the truth
    assert "the mirror in eu-west-1 was not written" in caplog.text
    assert mapdoc.decode(mirror_in(deployment[HOME], HOME).read(queue_name)).paused
    stale = mapdoc.decode(mirror_in(deployment[AWAY], AWAY).read(queue_name))
    assert (stale.paused, stale.version) == (False, created.version)

    report = away.coordinator(queue_name, "away-1").run_once()
    assert report.acted
    repaired = mapdoc.decode(mirror_in(deployment[AWAY], AWAY).read(queue_name))
    assert (repaired.paused, repaired.version) == (True, paused.version)


def test_an_untranslated_aws_error_in_another_regions_mirror_does_not_fail_the_change(
    regions, deployment, queue_name, monkeypatch, caplog
):
    """SSM's TooManyUpdates (two regions writing one mirror at once) is a plain ClientError."""
    home = regions[HOME]
    home.queues.create(queue_name)

    def busy(*_args, **_kwargs):
        raise ClientError({"Error": {"Code": "TooManyUpdates", "Message": "busy"}}, "PutParameter")

    monkeypatch.setattr(home.backend.remote[AWAY].mirror, "write", busy)
    assert home.queues.set_paused(queue_name, True).paused  # committed in the home item: not an error
    assert "the mirror in eu-west-1 was not written" in caplog.text
    assert mapdoc.decode(mirror_in(deployment[HOME], HOME).read(queue_name)).paused


def test_the_away_coordinator_scales_only_its_region_from_its_region_load(regions, clock, queue_name):
    home, away = regions[HOME], regions[AWAY]
    queue = home.queues.create(queue_name)
    coord_home, coord_away = home.coordinator(queue_name, "home-1"), away.coordinator(queue_name, "away-1")
    assert coord_home.run_once().acted and coord_away.run_once().acted  # first passes: measuring
    clock.advance(1_000)
    load(away, queue, requests=20, messages=200)  # 40+ WCU/s on a 10 WCU/s ceiling, in the away region only
    away_report = coord_away.run_once()
    home_report = coord_home.run_once()
    after = home.queues.get(queue_name)

    (q_away,) = away_report.queues
    assert q_away.region == AWAY and q_away.added and q_away.writes_per_s == pytest.approx(200)
    assert all(after.shard(sid).region == AWAY for sid in q_away.added)
    assert q_away.open_shards == len([s for s in after.shards_in(AWAY) if s.state == "open"]) > 1
    (q_home,) = home_report.queues
    assert (q_home.region, q_home.added, q_home.writes_per_s, q_home.open_shards) == (HOME, [], 0.0, 1)
    assert [s.id for s in after.shards_in(HOME)] == [s.id for s in queue.shards_in(HOME)]
    assert len({s.id for s in after.shards}) == len(after.shards)  # ids stay unique across regions
    # The home coordinator also reports the queue over every region: its pass plus the away one's.
    total = q_home.all_regions
    assert total is not None and away_report.queues[0].all_regions is None
    assert (total.open_shards, total.writes_per_s) == (1 + q_away.open_shards, pytest.approx(200))


def test_each_region_holds_its_own_ownership(regions, queue_name):
    home, away = regions[HOME], regions[AWAY]
    home.queues.create(queue_name)
    first_home, first_away = home.coordinator(queue_name, "home-1"), away.coordinator(queue_name, "away-1")
    assert first_home.run_once().acted and first_away.run_once().acted  # both at once: one item per region
    second_away = away.coordinator(queue_name, "away-2")
    stood_down = second_away.run_once()
    assert not stood_down.acted and "owned by away-1" in stood_down.message
    assert first_home.run_once().acted  # the away region's contention does not touch the home one
    items = {
        sk: item[keys.OWNER_HOLDER]
        for sk in (f"LEASE-{queue_name}#{HOME}", f"LEASE-{queue_name}#{AWAY}")
        if (item := home.backend.control.get(keys.COORDINATOR_PK, sk))
    }
    assert items == {f"LEASE-{queue_name}#{HOME}": "home-1", f"LEASE-{queue_name}#{AWAY}": "away-1"}


def test_a_stale_coordinator_of_a_region_is_refused_and_the_other_region_is_not(regions, clock, queue_name):
    home, away = regions[HOME], regions[AWAY]
    home.queues.create(queue_name)
    stale = away.coordinator(queue_name, "away-old")
    old = stale.run_once()
    clock.advance(LEASE_MS + 1)  # the old owner's ownership expires without a release
    taken = away.coordinator(queue_name, "away-new").run_once()
    assert taken.acted and taken.token == old.token + 1
    fenced = home.queues.get(queue_name)
    assert fenced.fence_of(AWAY) == taken.token
    assert fenced.fence_of(HOME) == 0
    item = home.backend.control.get(keys.queue_pk(queue_name), keys.QUEUE_SK)
    assert item[keys.fence_attribute(AWAY)] == taken.token

    def add_shard(q: Queue) -> Queue:
        return q.with_new_shards(1, AWAY, 1, clock())

    with pytest.raises(errors.Conflict):  # the old away coordinator still believes it owns the pass
        away.queues.modify(queue_name, add_shard, fence=old.token)
    assert home.queues.get(queue_name).next_shard_id == fenced.next_shard_id
    # The home region's coordinator has its own token (1), below the away region's fence: not refused.
    home_report = home.coordinator(queue_name, "home-1").run_once()
    assert home_report.acted and home_report.token == 1 and "stood down" not in home_report.message
    home.queues.modify(queue_name, lambda q: q.with_new_shards(1, HOME, 1, clock()), fence=home_report.token)
    assert home.queues.get(queue_name).fence_of(HOME) == 1


def test_a_region_without_shards_gets_min_shards_from_its_coordinator(regions, queue_name):
    home, away = regions[HOME], regions[AWAY]
    home.queues.create(queue_name, {"min_shards": 2})
    # As if the away region had been added after the queue was made: no shard there yet.
    home.queues.modify(queue_name, lambda q: q.model_copy(update={"shards": q.shards_in(HOME)}))
    report = away.coordinator(queue_name, "away-1").run_once()
    after = home.queues.get(queue_name)
    assert [(s.id, s.region) for s in after.shards] == [(0, HOME), (1, HOME), (4, AWAY), (5, AWAY)]
    assert report.queues[0].open_shards == 2
    assert after.fence_of(AWAY) == report.token


def test_an_ordered_queue_lives_in_the_home_region_only(regions, queue_name):
    """One sequencer per partition key: an ordered queue (every stream is one) has no shards elsewhere,
    and the away coordinator does not add any."""
    created = regions[AWAY].queues.create(queue_name, {"ordered": True, "min_shards": 2, "max_shards": 2})
    assert {s.region for s in created.shards} == {HOME} and len(created.shards) == 2
    regions[AWAY].coordinator(queue_name, "away-1").run_once()
    assert {s.region for s in regions[HOME].queues.get(queue_name).shards} == {HOME}


def test_tokens_are_verified_from_the_region_replica(regions, monkeypatch):
    home, away = regions[HOME], regions[AWAY]
    token_id, token = TokenStore(home.backend).create("*", ["read"])
    item = home.backend.control.get(keys.token_pk(_digest(token)), keys.TOKEN_SK)
    away.backend.local_control.put(item)  # what the global table's replication does
    assert away.backend.local_control is not away.backend.control

    def home_unreachable(*_args, **_kwargs):
        raise errors.DependencyUnavailable("DynamoDB could not be reached; retry shortly")

    monkeypatch.setattr(away.backend.control, "get", home_unreachable)
    assert TokenStore(away.backend).authenticate(f"Bearer {token}").token_id == token_id
    # A token the replica does not know, with the home region unreachable: refused, not an error.
    _, unknown = TokenStore(home.backend).create("*", ["read"])
    with pytest.raises(errors.Unauthorized):
        TokenStore(away.backend).authenticate(f"Bearer {unknown}")


def test_a_token_not_replicated_yet_is_found_in_the_home_table(regions):
    home, away = regions[HOME], regions[AWAY]
    token_id, token = TokenStore(home.backend).create("*", ["write"])
    assert away.backend.local_control.get(keys.token_pk(_digest(token)), keys.TOKEN_SK) is None
    assert TokenStore(away.backend).authenticate(f"Bearer {token}").token_id == token_id


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def test_queue_metrics_name_each_shard_region_and_give_figures_per_region(regions, queue_name):
    from sluice.service import Sluice

    home = regions[HOME]
    queue = home.queues.create(queue_name)
    for region, allocated in ((HOME, 1), (AWAY, 3)):  # sequences allocated, none acked: the backlog
        (shard,) = queue.shards_in(region)
        home.backend.table_for(shard).update(
            keys.shard_pk(queue, shard.id),
            keys.HEAD_SK,
            "SET #n = :n",
            names={"#n": keys.HEAD_NEXT},
            values={":n": allocated},
        )
    metrics = Sluice(home.backend).operations.metrics(queue_name)
    assert metrics["backlog_count"] == 4
    assert {r: figures["backlog_count"] for r, figures in metrics["regions"].items()} == {HOME: 1, AWAY: 3}
    assert [(s["region"], s["next_seq"]) for s in metrics["shards"]] == [(HOME, 1), (AWAY, 3)]


def test_idempotency_records_stay_in_the_region_table(deployment, monkeypatch):
    from lambdas.common import idempotency

    monkeypatch.setattr(idempotency, "get_settings", lambda: deployment[AWAY])
    idempotency._guarded.cache_clear()
    try:
        calls = []

        def send() -> dict:
            calls.append(1)
            return {"sent": len(calls)}

        queue, key = f"q-{uuid.uuid4().hex[:8]}", "k-1"
        assert idempotency.once(queue, key, {"n": 1}, send) == {"sent": 1}
        assert idempotency.once(queue, key, {"n": 1}, send) == {"sent": 1}  # the stored answer
        assert len(calls) == 1
    finally:
        idempotency._guarded.cache_clear()  # the next keyed send builds the session's own again
    table = deployment[AWAY].control_table
    records = {
        region: aws_client("dynamodb", region).scan(
            TableName=table,
            FilterExpression="sk = :s",
            ExpressionAttributeValues={":s": {"S": keys.IDEMPOTENCY_SK}},
        )["Count"]
        for region in (HOME, AWAY)
    }
    assert records == {HOME: 0, AWAY: 1}
