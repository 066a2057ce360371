"""`python -m bench.planner_cpu`: the pull planner's own CPU per full survey, by shard count.

A pull that surveys every shard reads each striped shard's 17 lane items and then walks them twice in
the planner: its figures (`PullPlanner.figures`) and the holds it remembers (`Holds.of`). The twin's
handler CPU (bench/twin/lambdas.py) is fitted per call and message on one shard and does not grow with
the shards surveyed; this prints what that leaves out. The reads are synthetic (every shard cut into
16 stripes, read to HEAD), in two states: every stripe held (the worst case, every shard left out of
the next polls) and one stripe on each shard left by its puller (no shard held). `time.process_time`,
one core, best of three one-second runs. Figures, not asserts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from sluice.engine.groupstate import GroupState
from sluice.engine.lanes import MAX_STRIPES, STRIPE_BLOCK, Cursor, GroupLanes, LaneState
from sluice.engine.pullplan import BUSY_MS, HELD_MS, Busy, Holds, PullPlanner
from sluice.engine.shardstate import ShardRead
from sluice.engine.store.items import Head, ShardAddress
from sluice.models import Shard

NOW_MS = 1_000_000
GROUP = "g"
BASE = 10_000  # the stripes' base (the cut's sequence)
SENT = 5_000  # sequences sent since the cut, every one read by its stripe


def striped_reads(shards: int, *, one_left: bool) -> list[ShardRead]:
    """`shards` survey reads, each cut into MAX_STRIPES stripes read to HEAD and committed 100 ms ago
    (held); with `one_left`, each shard's last stripe was last committed 5 s ago (its puller left)."""
    out = []
    for shard_id in range(shards):
        cursor = Cursor(
            next=BASE,
            lanes=MAX_STRIPES + 1,
            high=MAX_STRIPES + 1,
            ranges={0: (BASE, BASE)},
            stripe=STRIPE_BLOCK,
            epoch=1,
        )
        lanes = {0: LaneState(0, GroupState(read=BASE, read_item=BASE, version=3), last_ms=NOW_MS - 5_000)}
        for lane in range(1, MAX_STRIPES + 1):
            left = one_left and lane == MAX_STRIPES
            state = GroupState(read=BASE + SENT, read_item=BASE + SENT, version=9)
            lanes[lane] = LaneState(lane, state, last_ms=NOW_MS - (5_000 if left else 100))
        address = ShardAddress("q", "i1", Shard(id=shard_id, table=0, created_ms=0))
        out.append(ShardRead(address, Head(next=BASE + SENT), {GROUP: GroupLanes(cursor, lanes)}))
    return out


def ms_per_call(call: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        calls, started = 0, time.process_time()
        while time.process_time() - started < 1.0:
            call()
            calls += 1
        best = min(best, (time.process_time() - started) / calls * 1000)
    return best


def main() -> None:
    taken = Busy(BUSY_MS, frozenset(), HELD_MS)
    print("| shards (16 stripes each) | figures ms | Holds.of ms, all held | Holds.of ms, one left a shard |")
    print("|---:|---:|---:|---:|")
    for shards in (1, 32, 128, 256):
        held, left = striped_reads(shards, one_left=False), striped_reads(shards, one_left=True)
        assert len(Holds.of(held, GROUP, NOW_MS, taken).active(NOW_MS)) == shards
        assert not Holds.of(left, GROUP, NOW_MS, taken).active(NOW_MS)
        figures = ms_per_call(partial(PullPlanner.figures, held, GROUP, NOW_MS))
        all_held = ms_per_call(partial(Holds.of, held, GROUP, NOW_MS, taken))
        one_left = ms_per_call(partial(Holds.of, left, GROUP, NOW_MS, taken))
        print(f"| {shards} | {figures:.2f} | {all_held:.2f} | {one_left:.2f} |")


if __name__ == "__main__":
    main()
