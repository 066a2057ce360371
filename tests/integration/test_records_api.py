"""Native stream reads over HTTP (`/records`, `/shards`), the shard function and its local timer."""

from __future__ import annotations

import threading
import time

from sluice import constants as c
from sluice.local.runtime import LocalRuntime, Timer


def _send(api, queue_name, values, key=None):
    msgs = [{"body": v, "partition_key": key} for v in values]
    status, body = api("POST", f"/v1/queues/{queue_name}/messages", {"messages": msgs})
    assert status == 200, body
    return body["result"]


def _page_all(api, queue_name, query_extra="", limit=3):
    got, offset = [], "-"
    while True:
        status, body = api(
            "GET", f"/v1/queues/{queue_name}/records", query=f"offset={offset}&limit={limit}{query_extra}"
        )
        assert status == 200, body
        records = body["result"]["records"]
        if not records:
            return got
        got += records
        offset = body["result"]["next_offset"]


def test_records_over_shards_and_per_shard(api, queue_name):
    from sluice.local.workers import invoke

    api("POST", "/v1/queues", {"queue_name": queue_name, "settings": {"min_shards": 2, "ordered": True}})
    for i in range(6):
        _send(api, queue_name, [{"i": i}], key=f"k{i % 2}")
    invoke(c.FN_SHARD, {"action": "flush", "queue": queue_name})  # half the reads now come from S3
    for i in range(6, 10):
        _send(api, queue_name, [{"i": i}], key=f"k{i % 2}")
    records = _page_all(api, queue_name)
    assert sorted(r["body"]["i"] for r in records) == list(range(10))
    assert set(records[0]) == {
        "offset",
        "shard",
        "id",
        "body",
        "content_type",
        "timestamp_ms",
        "partition_key",
        "attributes",
    }
    for key in ("k0", "k1"):
        mine = [r["body"]["i"] for r in records if r["partition_key"] == key]
        assert mine == sorted(mine)
    _, body = api("GET", f"/v1/queues/{queue_name}/shards")
    shards = body["result"]["shards"]
    assert [s["shard"] for s in shards] == [0, 1] and all(s["parents"] == [] for s in shards)
    for shard in shards:
        per_shard = _page_all(api, queue_name, f"&shard={shard['shard']}", limit=2)
        assert [r["shard"] for r in per_shard] == [shard["shard"]] * len(per_shard)
        if per_shard:
            assert shard["first_offset"] == per_shard[0]["offset"]
            assert shard["last_offset"] == per_shard[-1]["offset"]


def test_records_by_time_and_only_new(api, queue_name):
    api("POST", "/v1/queues", {"queue_name": queue_name})
    first = _send(api, queue_name, ["a"])
    status, body = api("GET", f"/v1/queues/{queue_name}/records", query="limit=10")
    assert status == 200 and body["result"]["records"] == []  # absent offset: only new ones
    time.sleep(0.01)
    later_ms = int(time.time() * 1000)
    time.sleep(0.01)
    _send(api, queue_name, ["b", "c"])
    status, body = api("GET", f"/v1/queues/{queue_name}/records", query=f"start={later_ms}")
    assert [r["body"] for r in body["result"]["records"]] == ["b", "c"]
    status, body = api("GET", f"/v1/queues/{queue_name}/records", query=f"offset={first['offsets'][0]}")
    assert [r["body"] for r in body["result"]["records"]] == ["b", "c"]


def test_records_bad_input_is_400(api, queue_name):
    api("POST", "/v1/queues", {"queue_name": queue_name})
    for query in ("timeout_sec=21", "limit=0", "limit=1001", "offset=xyz", "offset=-&start=5"):
        status, body = api("GET", f"/v1/queues/{queue_name}/records", query=query)
        assert status == 400 and body["errors"][0]["code"] in (10100, 10122), (query, body)
    status, body = api("GET", f"/v1/queues/{queue_name}/records", query="shard=7")
    assert status == 404 and body["errors"][0]["code"] == 10123


def test_shard_function_event_and_report(engine, queue_name):
    from sluice.local.workers import invoke

    engine.queues.create(queue_name)
    from sluice.models import OutgoingMessage

    engine.publisher.publish(queue_name, [OutgoingMessage(body=b"1")])
    report = invoke(c.FN_SHARD, {"action": "all", "queue": queue_name})
    assert report["flushed_records"] == 1 and report["segments_written"] == 1 and report["errors"] == []
    assert invoke(c.FN_SHARD, {"queue": queue_name})["flushed_records"] == 0  # nothing new


def test_local_timers_invoke_their_function_on_the_interval():
    calls: list[dict] = []

    class Pool:
        def invoke(self, event, timeout_seconds=0):
            calls.append(event)

    runtime = LocalRuntime(timers=(Timer(c.FN_SHARD, 0.02, {"action": "all"}),))
    runtime.pools = {c.FN_SHARD: Pool()}
    runtime._stopping = threading.Event()
    thread = threading.Thread(target=runtime._run_timer, args=(runtime.timers[0],))
    thread.start()
    time.sleep(0.2)
    runtime._stopping.set()
    thread.join(1)
    assert len(calls) >= 3 and all(call["action"] == "all" for call in calls)
