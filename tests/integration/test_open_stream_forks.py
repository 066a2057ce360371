"""Forks of open Durable Streams protocol streams (PROTOCOL.md 4.2) through the real handlers: create
at an offset and a sub-offset, reads stitched from the source, soft delete with 410 and cascading
deletion, TTL inheritance, and a fork reading its source's history out of S3 (nothing is copied)."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from sluice import constants as c
from tests.conftest import FakeClock
from tests.integration.test_open_streams import JSON, TEXT, call

BASE = c.OPEN_STREAM_ROUTE_PREFIX


@pytest.fixture
def paths(engine):
    """Fresh stream paths: `paths(n)` → n paths under one run id."""
    run = uuid.uuid4().hex[:8]
    return lambda n: [f"{BASE}f/{run}/{i}" for i in range(n)]


def fork(path, source, *, offset=None, sub=None, headers=None, body=""):
    extra = {"Stream-Forked-From": source, **(headers or {})}
    if offset is not None:
        extra["Stream-Fork-Offset"] = offset
    if sub is not None:
        extra["Stream-Fork-Sub-Offset"] = sub
    return call("PUT", path, body, headers=extra)


def read(path, offset="-1"):
    status, headers, body = call("GET", path, query=f"offset={offset}")
    assert status == 200, (status, body)
    return body, headers


def test_fork_inherits_up_to_the_offset_and_then_diverges(paths):
    src, at_tail, mid = paths(3)
    status, headers, _ = call("PUT", src, "first", headers=TEXT)
    after_first = headers["stream-next-offset"]
    call("POST", src, "second", headers=TEXT)
    status, headers, _ = fork(at_tail, src)  # no offset: the source's tail, Content-Type inherited
    assert (status, headers["content-type"], headers["stream-next-offset"]) == (
        201,
        "text/plain",
        "0" * 15 + "2",
    )
    assert "stream-forked-from" not in headers
    assert fork(mid, src, offset=after_first, headers=TEXT)[0] == 201
    call("POST", src, "-source-only", headers=TEXT)
    assert call("POST", mid, "+fork", headers=TEXT)[0] == 204
    assert read(mid)[0] == b"first+fork"  # same offsets as the source, then the fork's own
    assert read(mid, after_first)[0] == b"+fork"
    assert read(at_tail)[0] == b"firstsecond"
    assert read(src)[0] == b"firstsecond-source-only"
    assert fork(mid, src, offset=after_first)[0] == 200  # idempotent
    assert fork(mid, src, offset="0000000000000000")[0] == 409  # another fork offset
    assert call("PUT", mid, headers=TEXT)[0] == 409  # not a fork: another configuration


def test_fork_refusals_change_nothing(paths):
    src, target = paths(2)
    call("PUT", src, "hello", headers=TEXT)
    assert fork(target, f"{BASE}f/none")[0] == 404
    assert fork(target, src, offset="9999999999999999_9999999999999999")[0] == 400
    assert fork(target, src, offset="garbage")[0] == 400
    assert fork(target, src, headers=JSON)[0] == 409  # content type differs from the source's
    for bad in ("-1", "abc", "1.5", "05", "+1"):
        assert fork(target, src, offset="0000000000000000", sub=bad)[0] == 400
    assert fork(target, src, sub="1")[0] == 400  # a sub-offset needs an offset
    assert call("PUT", target, headers={**TEXT, "Stream-Fork-Sub-Offset": "0"})[0] == 400
    assert fork(target, src, offset="0000000000000000", sub="6")[0] == 400  # past "hello"
    assert call("HEAD", target)[0] == 404
    assert call("DELETE", src)[0] == 204  # no reference leaked by the refusals: deleted for good
    assert call("HEAD", src)[0] == 404


def test_sub_offsets_cut_binary_bytes_and_json_messages(paths):
    text_src, text_fork, chained, json_src, json_fork = paths(5)
    call("PUT", text_src, "abcdef", headers=TEXT)
    assert fork(text_fork, text_src, offset="0000000000000000_0000000000000000", sub="4")[0] == 201
    assert call("POST", text_fork, "XY", headers=TEXT)[0] == 204
    assert read(text_fork)[0] == b"abcdXY"
    assert fork(chained, text_fork, offset="0000000000000000", sub="2")[0] == 201
    assert read(chained)[0] == b"ab"
    call("PUT", json_src, json.dumps([{"a": 1}, {"b": 2}, {"c": 3}]), headers=JSON)
    assert fork(json_fork, json_src, offset="0000000000000000", sub="4")[0] == 400
    assert fork(json_fork, json_src, offset="0000000000000000", sub="2")[0] == 201
    producer = {"Producer-Id": "p", "Producer-Epoch": "0", "Producer-Seq": "0"}
    assert call("POST", json_fork, '[{"z":9}]', headers={**JSON, **producer})[0] == 200  # fresh state
    assert json.loads(read(json_fork)[0]) == [{"a": 1}, {"b": 2}, {"z": 9}]


def test_soft_delete_answers_410_and_the_last_fork_deletes_the_chain(paths):
    root, middle, leaf, other = paths(4)
    call("PUT", root, "A", headers=TEXT)
    fork(middle, root)
    call("POST", middle, "B", headers=TEXT)
    fork(leaf, middle)
    call("POST", leaf, "C", headers=TEXT)
    assert call("DELETE", root)[0] == 204
    assert call("DELETE", middle)[0] == 204
    for method in ("HEAD", "GET", "POST", "DELETE"):
        assert call(method, middle, "x", headers=TEXT)[0] == 410, method
    assert call("PUT", middle, headers=TEXT)[0] == 409  # a soft-deleted path cannot be created again
    assert fork(other, middle)[0] == 409  # nor forked
    assert read(leaf)[0] == b"ABC"  # the fork still reads both deleted levels
    assert call("DELETE", leaf)[0] == 204
    assert [call("HEAD", p)[0] for p in (leaf, middle, root)] == [404, 404, 404]  # cascaded
    assert call("PUT", root, "new", headers=TEXT)[0] == 201
    assert read(root)[0] == b"new"


def test_ttl_and_expiry_are_inherited_unless_given(paths):
    src, inherit, own, dated = paths(4)
    call("PUT", src, "x", headers={**TEXT, "Stream-TTL": "3600"})
    fork(inherit, src)
    assert call("HEAD", inherit)[1]["stream-ttl"] == "3600"
    fork(own, src, headers={"Stream-TTL": "99999"})
    assert call("HEAD", own)[1]["stream-ttl"] == "99999"
    fork(dated, src, headers={"Stream-Expires-At": "2099-01-01T00:00:00Z"})
    headers = call("HEAD", dated)[1]
    assert headers["stream-expires-at"] == "2099-01-01T00:00:00Z" and "stream-ttl" not in headers


def test_an_expired_source_is_kept_for_its_fork_and_the_fork_outlives_it(paths):
    src, child = paths(2)
    call("PUT", src, "kept", headers={**TEXT, "Stream-TTL": "1"})
    fork(child, src, headers={"Stream-TTL": "60"})
    time.sleep(1.2)
    assert call("HEAD", src)[0] == 404  # expired: absent to clients
    assert call("POST", src, "x", headers=TEXT)[0] == 404  # a write path drops it: soft, it has a fork
    assert read(child)[0] == b"kept"
    assert call("DELETE", child)[0] == 204
    assert call("PUT", src, headers=TEXT)[0] == 201  # the last fork gone, the source went too


def test_a_fork_reads_its_sources_history_from_s3_without_copying_it(settings, paths):
    from sluice.engine import keys
    from sluice.engine.openstreams import queue_name_for
    from sluice.service import Sluice

    src, child = paths(2)
    call("PUT", src, headers=JSON)
    sent = [{"n": i} for i in range(60)]
    assert call("POST", src, json.dumps(sent), headers=JSON)[0] == 204
    status, headers, _ = fork(child, src, offset="0000000000000050")
    assert status == 201 and headers["stream-next-offset"] == "0000000000000050"
    clock = FakeClock(int(time.time() * 1000))
    worker = Sluice.from_settings(settings, clock=clock)
    child_queue = worker.queues.get(queue_name_for(child.removeprefix(BASE)))
    table = worker.backend.table_for(child_queue.shards[0])
    own = list(table.query(keys.shard_pk(child_queue, 0), sk_from=keys.MSG_SK_PREFIX, sk_to=keys.MSG_SK_END))
    assert own == []  # the fork holds none of the source's records
    name = queue_name_for(src.removeprefix(BASE))
    worker.shard_worker.run("flush", name)
    queue = worker.queues.get(name)
    clock.advance(queue.settings.retention_seconds * 1000 + 1000)
    worker.shard_worker.run("sweep", name)
    hot = worker.backend.table_for(queue.shards[0])
    assert not list(hot.query(keys.shard_pk(queue, 0), sk_from=keys.MSG_SK_PREFIX, sk_to=keys.MSG_SK_END))
    call("POST", child, '{"n":"fork"}', headers=JSON)
    assert json.loads(read(child)[0]) == [*sent[:50], {"n": "fork"}]
