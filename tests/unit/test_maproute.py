"""The map stamp on HEAD items (sluice/engine/maproute.py): a container adopts a newer route of its
region without reading the document, and refuses any route it cannot take safely."""

from __future__ import annotations

from sluice.engine import maproute
from sluice.models import Queue, QueueSettings

T0 = 1_700_000_000_000


def _queue(shards: int = 2, region: str | None = None) -> Queue:
    queue = Queue(name="q", settings=QueueSettings(max_shards=256), created_ms=T0, incarnation="ab")
    return queue.with_new_shards(shards, region, 4, T0)


def _open(queue: Queue) -> list[int]:
    return [s.id for s in queue.open_shards]


def test_ranges_round_trip():
    ids = [0, 1, 2, 5, 7, 8, 20]
    assert maproute.ranges(ids) == "0-2,5,7-8,20"
    assert maproute.parse_ranges("0-2,5,7-8,20") == ids
    assert maproute.parse_ranges("") == []


def test_new_shards_are_adopted_and_sealed_ones_leave_the_open_set():
    cached = _queue(2)
    newer = cached.with_new_shards(6, None, 4, T0 + 1)
    shards = [s.model_copy(update={"state": "sealed"}) if s.id == 1 else s for s in newer.shards]
    newer = newer.model_copy(update={"shards": shards, "version": 3})
    stamp = maproute.route(newer, None, 4)
    assert stamp.endswith("/4/0,2-7")
    adopted = maproute.adopt(cached, None, stamp)
    assert adopted is not None
    assert _open(adopted) == [0, 2, 3, 4, 5, 6, 7]
    assert [(s.id, s.table) for s in adopted.shards if s.id >= 2] == [(i, i % 4) for i in range(2, 8)]
    assert adopted.shard(1).state == "sealed" and adopted.next_shard_id == 8


def test_a_change_beyond_the_shard_map_needs_the_document():
    cached = _queue(2)
    paused = cached.model_copy(update={"paused": True, "version": 2})
    assert maproute.adopt(cached, None, maproute.route(paused, None, 4)) is None
    fenced = cached.model_copy(update={"fence": 9, "version": 2})  # a coordinator's fence: not config
    assert maproute.adopt(cached, None, maproute.route(fenced, None, 4)) is not None


def test_routes_that_cannot_be_said_are_the_digest_alone():
    queue = _queue(1)
    for step in range(200):  # a fragmented open set: every other id sealed
        queue = queue.with_new_shards(2, None, 4, T0 + step)
    shards = [s.model_copy(update={"state": "sealed"}) if s.id % 2 else s for s in queue.shards]
    queue = queue.model_copy(update={"shards": shards})
    assert "/" not in maproute.route(queue, None, 4)  # over MAX_ROUTE_CHARS
    odd = _queue(2)
    odd = odd.model_copy(update={"shards": [odd.shards[0].model_copy(update={"table": 3}), odd.shards[1]]})
    assert "/" not in maproute.route(odd, None, 4)  # a table a broker could not derive
    assert maproute.adopt(_queue(2), None, maproute.route(queue, None, 4)) is None


def test_only_the_stamps_region_changes():
    cached = _queue(2, "eu-west-1").with_new_shards(2, "us-east-1", 4, T0)
    newer = cached.with_new_shards(3, "eu-west-1", 4, T0 + 1).model_copy(update={"version": 2})
    adopted = maproute.adopt(
        cached, "eu-west-1", maproute.route(newer, "eu-west-1", 4, "us-east-1"), "us-east-1"
    )
    assert adopted is not None
    assert [(s.id, s.region) for s in adopted.open_shards] == [
        (0, "eu-west-1"),
        (1, "eu-west-1"),
        (2, "us-east-1"),
        (3, "us-east-1"),
        (4, "eu-west-1"),
        (5, "eu-west-1"),
        (6, "eu-west-1"),
    ]


def test_a_route_naming_an_id_we_dropped_or_reopening_a_shard_is_refused():
    cached = _queue(4)
    shards = [s.model_copy(update={"state": "sealed"}) if s.id == 3 else s for s in cached.shards]
    cached = cached.model_copy(update={"shards": shards})
    reopened = f"{maproute.config_digest(cached)}/4/0-3"
    assert maproute.adopt(cached, None, reopened) is None
    dropped = cached.model_copy(update={"shards": cached.shards[1:]})  # shard 0 retired and dropped
    assert maproute.adopt(dropped, None, f"{maproute.config_digest(cached)}/4/0-2") is None
