"""Native stream reads over HTTP (`/records`, `/shards`) and the shard function's typed event."""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from sluice import constants as c
from sluice.engine import keys
from sluice.events import ShardWorkEvent


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
    flush = ShardWorkEvent(queue=queue_name, shards=[0, 1], actions=["flush"])
    invoke(c.FN_SHARD, flush.to_payload())  # half the reads now come from S3
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


def test_shard_function_does_what_its_event_says_on_the_shards_it_lists(engine, queue_name):
    from sluice.local.workers import invoke
    from sluice.models import OutgoingMessage

    engine.queues.create(queue_name, {"min_shards": 2})
    for i in range(8):
        engine.publisher.publish(queue_name, [OutgoingMessage(body=str(i).encode(), partition_key=f"k{i}")])
    queue = engine.queues.get(queue_name)
    heads = {
        s.id: engine.backend.table_for(s).get(keys.shard_pk(queue, s.id), keys.HEAD_SK) or {}
        for s in queue.shards
    }
    assert all(h.get("next") for h in heads.values()), "both shards took writes"
    event = ShardWorkEvent(queue=queue_name, shards=[1], actions=["flush", "compact"])
    report = invoke(c.FN_SHARD, event.to_payload())
    assert report["shards"] == 1 and report["errors"] == []
    assert report["flushed_records"] == heads[1]["next"] and report["segments_written"] == 1
    # Shard 0 was not listed: nothing of it went to S3.
    again = invoke(
        c.FN_SHARD, ShardWorkEvent(queue=queue_name, shards=[0, 1], actions=["flush"]).to_payload()
    )
    assert again["flushed_records"] == heads[0]["next"]


@pytest.mark.parametrize(
    "event",
    [
        {"action": "all"},  # the untyped event of before: refused, not read as "everything"
        {"kind": "shard.work", "queue": "q", "shards": [], "actions": ["flush"]},
        {"kind": "shard.work", "queue": "q", "shards": [0], "actions": ["sweep"]},  # DynamoDB's job
    ],
)
def test_shard_function_refuses_an_event_that_is_not_a_shard_work_event(event):
    from sluice.local.workers import invoke

    with pytest.raises(ValidationError):
        invoke(c.FN_SHARD, event)
