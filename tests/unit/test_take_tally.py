"""A take's lost races are its own (sluice/engine/shardlease.py `Tally`): a threaded host serves many
pulls with one engine, and a process-wide count read one pull's lost race as every concurrent pull's
(they let go of their lanes and widened on races they never ran)."""

from __future__ import annotations

from bench.twin.world import build
from sluice.engine.shardlease import Tally
from sluice.models import OutgoingMessage


def test_two_takes_of_one_engine_count_only_their_own_lost_races() -> None:
    world = build()
    queue = world.engine.queues.create("q", {"min_shards": 1, "max_shards": 1})
    world.engine.groups.create("q", "g")
    world.engine.publisher.publish("q", [OutgoingMessage(body=b'{"n": %d}' % n) for n in range(4)])
    consumer = world.engine.consumer  # one engine, as `sluice local` shares one across its threads
    shard = queue.shards[0]
    first = consumer.planner.lane(queue, shard, "g", 0, head=True)
    second = consumer.planner.lane(queue, shard, "g", 0, head=True)  # read before `first` commits
    won, lost = Tally(), Tally()

    got_first = consumer.leaser.take(queue, first, 2, 30_000, None, None, won)
    got_second = consumer.leaser.take(queue, second, 2, 30_000, None, None, lost)

    assert len(got_first) == 2 and won == Tally(lost_races=0, contended=False)
    assert lost.lost_races >= 1  # its first commit met `first`'s version
    assert {m.body for m in got_first}.isdisjoint({m.body for m in got_second})
