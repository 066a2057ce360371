"""The mirror document (sluice/engine/mapdoc.py): every shard count up to max_shards x regions fits SSM,
and it decodes to the queue it was made from (less shard lineage, which the control item keeps)."""

from __future__ import annotations

import pytest

from sluice.adapters.ssm import STANDARD_MAX_BYTES, split
from sluice.engine import mapdoc
from sluice.models import Queue, QueueSettings

T0 = 1_700_000_000_000
REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-1")


def _queue(groups: int = 1) -> Queue:
    queue = Queue(
        name="q" * 63,
        settings=QueueSettings(min_shards=1, max_shards=256, dead_letter_queue="d" * 63),
        created_ms=T0,
        incarnation="abcd1234",
    )
    return queue.model_copy(update={"groups": {f"{'g' * 55}{i:08d}": T0 + i for i in range(groups)}})


def _routing(queue: Queue) -> list[tuple[int, int, str, str | None]]:
    return [(s.id, s.table, s.state, s.region) for s in queue.shards]


def test_a_full_map_of_256_shards_in_three_interleaved_regions_fits_one_standard_value():
    """The worst ids can do: every scale-up +1 shard, the regions taking turns; 32 groups, long names."""
    queue = _queue(groups=32)
    for step in range(256):
        for region in REGIONS:
            queue = queue.with_new_shards(1, region, 4, T0 + step)
    doc = mapdoc.encode(queue, tables=4)
    assert len(queue.model_dump_json()) > 75_000  # what the mirror held before
    assert len(doc.encode()) <= STANDARD_MAX_BYTES
    assert _routing(mapdoc.decode(doc)) == _routing(queue)


def test_states_regions_gaps_and_odd_tables_survive():
    queue = _queue().with_new_shards(40, None, 4, T0)
    shards = [s.model_copy() for s in queue.shards if s.id not in (7, 8, 30)]  # dropped retired shards
    for shard in shards:
        shard.state = ("open", "sealed", "retired")[shard.id % 3]
    shards[5].table = 3  # a shard made when the deployment had another table count
    queue = queue.model_copy(update={"shards": shards, "paused": True, "fences": {"eu-west-1": 7}})
    back = mapdoc.decode(mapdoc.encode(queue, tables=4))
    assert _routing(back) == _routing(queue)
    assert back.model_dump(exclude={"shards"}) == queue.model_dump(exclude={"shards"})
    assert all(s.created_ms == T0 and s.parents == [] for s in back.shards)


def test_an_older_versions_full_document_still_decodes():
    queue = _queue().with_new_shards(3, None, 4, T0 + 5)
    assert mapdoc.decode(queue.model_dump_json()) == queue


def test_thirty_regions_of_256_shards_are_split_into_values_ssm_takes():
    queue = _queue(groups=32)
    regions = [f"r-{i:02d}" for i in range(mapdoc.MAX_REGIONS)]
    for step in range(256):
        for region in regions:
            queue = queue.with_new_shards(1, region, 4, T0 + step)
    doc = mapdoc.encode(queue, tables=4)
    assert len(doc) > STANDARD_MAX_BYTES
    assert all(len(part.encode()) <= STANDARD_MAX_BYTES for part in split(doc))
    assert _routing(mapdoc.decode(doc)) == _routing(queue)


def test_more_regions_than_codes_is_a_clear_error():
    queue = _queue()
    for i in range(mapdoc.MAX_REGIONS + 1):
        queue = queue.with_new_shards(1, f"r-{i}", 4, T0)
    with pytest.raises(ValueError, match="at most 30 regions"):
        mapdoc.encode(queue, tables=4)
