"""Only the template's schedules drive `sluice local` here: no test code invokes the coordinator or
the shard function. The EventBridge rule (run 12 times faster: every 5 s, a 0.42 s coordinator tick,
flush and maintenance every 5 s) is all it takes for a queue that is not bottomless and a bottomless
one to be flushed to S3 and compacted, while producers keep sending over HTTP."""

from __future__ import annotations

import time

import pytest

from sluice import constants as c
from sluice.client import SluiceClient
from sluice.local.runtime import LocalRuntime
from sluice.local.schedules import Schedule, schedules_from_template
from sluice.local.template import load_template
from sluice.segments import list_segments
from sluice.service import Sluice

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
TOKEN = "schedule-e2e-token"
SCALE = 12.0


@pytest.fixture(scope="module")
def runtime():
    rt = LocalRuntime(port=0, admin_token=TOKEN, stage="sched", time_scale=SCALE)
    rt.start()
    yield rt
    rt.stop()


def test_the_runtime_fires_the_templates_rule_with_its_input_only(runtime):
    rule_period = c.COORDINATOR_SCHEDULE_MINUTES * 60
    assert runtime.schedules == schedules_from_template(load_template(), SCALE)
    assert [(s.function, s.interval_seconds, s.event) for s in runtime.schedules] == [
        (c.FN_COORDINATOR, rule_period / SCALE, {"kind": "coordinator.run"})
    ]
    assert all(isinstance(s, Schedule) for s in runtime.schedules)


def test_schedules_alone_flush_and_compact_a_plain_and_a_bottomless_queue(runtime):
    engine = Sluice.from_settings(runtime.settings)
    client = SluiceClient(runtime.url, TOKEN)
    queues = {"plain-q": False, "deep-q": True}
    for name, bottomless in queues.items():
        client.create_queue(name, bottomless=bottomless, max_shards=1)
    sent = dict.fromkeys(queues, 0)
    state: dict[str, tuple[int, int]] = {}
    started = time.monotonic()
    while time.monotonic() - started < 240:  # loaded machines; ~30 s when idle
        for name in queues:
            client.send_batch(name, [{"body": {"n": sent[name] + i}} for i in range(5)])
            sent[name] += 5
        for name in queues:
            refs = list_segments(engine.backend, engine.queues.get(name), 0)
            state[name] = (sum(r.last - r.first + 1 for r in refs), max((r.level for r in refs), default=-1))
        if all(records > 0 and level >= 1 for records, level in state.values()):
            break
        time.sleep(0.5)
    elapsed = time.monotonic() - started
    print(f"\nafter {elapsed:.0f} s: (records in S3, highest segment level) per queue {state}, sent {sent}")
    for name in queues:
        records, level = state[name]
        assert level >= 1, f"{name}: never compacted ({state})"  # FANOUT level-0 segments merged
        assert 0 < records <= sent[name]
    # Every record is still readable, from S3 and the hot tier together, in order.
    for name in queues:
        offset, got = "-", []
        while True:
            page = client.request(
                "GET", f"/v1/queues/{name}/records", query={"offset": offset, "limit": 1000}
            )
            if not page["records"]:
                break
            got += [r["body"]["n"] for r in page["records"]]
            offset = page["next_offset"]
        assert got == list(range(sent[name])), name
