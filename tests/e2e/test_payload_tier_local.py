"""The payload tier on `sluice local`, over HTTP: 64 KB messages sent in batches of 10 go to S3 (by price,
`payload_tier: auto`), are pulled and replayed, and are replayed again from segments once the runtime's
own schedules have flushed and compacted them and the hot tier (items and payload objects) has expired.
(The Spark segment reader reads such a queue in tests/spark/test_payload_tier_spark.py, on both Glue
lines.)"""

from __future__ import annotations

import base64
import json
import os
import time
import urllib.error
import urllib.request

import pytest

from sluice.client import SluiceClient
from sluice.constants import LAMBDA_SYNC_PAYLOAD_BYTES
from sluice.engine import keys, payloads
from sluice.local import gateway
from sluice.local.runtime import LocalRuntime
from sluice.models import MAX_SEND_BYTES
from sluice.segments import list_segments
from sluice.service import Sluice

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
TOKEN = "tier-e2e-token"
BODY = 64 * 1024
SENDS = 8
RETENTION_S = 60  # the hot tier's shortest: after it, only segments hold the messages


@pytest.fixture(scope="module")
def runtime():
    rt = LocalRuntime(port=0, admin_token=TOKEN, stage="tier", time_scale=12.0)  # flush every 5 s
    rt.start()
    yield rt
    rt.stop()


def _wait_flushed(engine: Sluice, queue, records: int, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while sum(r.count for r in list_segments(engine.backend, queue, 0)) < records:
        assert time.monotonic() < deadline, "the runtime's schedules did not get there in time"
        time.sleep(0.5)


def _replay(client: SluiceClient, name: str) -> list[str]:
    offset, got = "-", []
    while True:
        page = client.request("GET", f"/v1/queues/{name}/records", query={"offset": offset, "limit": 25})
        if not page["records"]:
            return got
        got += [r["body"] for r in page["records"]]
        offset = page["next_offset"]


def test_64_kb_batches_of_10_are_pulled_and_replayed_from_the_tier_then_from_segments(runtime):
    client = SluiceClient(runtime.url, TOKEN)
    engine = Sluice.from_settings(runtime.settings)
    name = "tier-q"
    client.create_queue(name, bottomless=True, retention_seconds=RETENTION_S, max_shards=1)
    queue = engine.queues.get(name)
    sent: list[str] = []
    started = time.monotonic()
    for n in range(SENDS):
        batch = [f"{n:02d}{i:02d}:" + os.urandom(BODY).hex()[: BODY - 5] for i in range(10)]
        client.send_batch(name, [{"body": b, "content_type": "text"} for b in batch])
        sent += batch
        if n % 2:  # a flush between pairs of sends: FANOUT level-0 segments, for the schedules to compact
            _wait_flushed(engine, queue, len(sent))
    table = engine.backend.table_for(queue.shards[0])
    items = list(table.query(keys.shard_pk(queue, 0), sk_from=keys.msg_sk(0), sk_to=keys.MSG_SK_END))
    assert len(items) == SENDS and all(keys.ITEM_PAYLOAD in i for i in items)  # every send in S3

    pulled = []
    while got := client.pull(name, batch_size=10).messages:
        client.ack(name, [m.lease_id for m in got])
        pulled += [m.body for m in got]
    assert sorted(pulled) == sorted(sent)
    assert _replay(client, name) == sent

    # The schedules alone flush and compact; then the items expire and the sweep removes them with
    # their payload objects: a replay now reads segments only.
    bucket = engine.backend.bucket_for(queue.shards[0])
    prefix = payloads.object_prefix(keys.shard_pk(queue, 0))
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        refs = list_segments(engine.backend, queue, 0)
        hot = list(table.query(keys.shard_pk(queue, 0), sk_from=keys.msg_sk(0), sk_to=keys.MSG_SK_END))
        if max((r.level for r in refs), default=-1) >= 1 and not hot and not list(bucket.keys(prefix)):
            break
        time.sleep(2)
    print(f"\nflushed, compacted and expired after {time.monotonic() - started:.0f} s: segments {refs}")
    assert max(r.level for r in refs) >= 1 and sum(r.count for r in refs) == len(sent)
    assert not hot and not list(bucket.keys(prefix))
    assert _replay(client, name) == sent


def _post(url: str, raw: bytes) -> tuple[int, dict]:
    headers = {"content-type": "application/json", "authorization": f"Bearer {TOKEN}"}
    request = urllib.request.Request(url, data=raw, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_4_mib_send_of_escaped_base64_bytes_fits_lambdas_event_limit(runtime):
    """The native send's 4 MiB at its worst: 100 `bytes` messages (base64 on the wire) whose JSON
    escapes every `/` as JSON allows, wrapped in the API Gateway event (which escapes the body's
    quotes again), stays under Lambda's 6 MB read as 6,000,000 bytes; a byte more is 413 10108."""
    client = SluiceClient(runtime.url, TOKEN)
    name = "tier-4mib"
    client.create_queue(name, max_message_bytes=1_048_576)
    bodies = [os.urandom(MAX_SEND_BYTES // 100) for _ in range(100)]

    def request(extra: int) -> bytes:
        messages = [{"body": base64.b64encode(b).decode(), "content_type": "bytes"} for b in bodies]
        messages[0]["body"] = base64.b64encode(bodies[0] + b"x" * extra).decode()
        return json.dumps({"messages": messages}).replace("/", "\\/").encode()

    path = f"/v1/queues/{name}/messages"
    raw = request(0)
    found = gateway.match("POST", path)
    assert found is not None
    headers = [("content-type", "application/json"), ("authorization", f"Bearer {TOKEN}")]
    event = gateway.build_event(found[0], found[1], "POST", path, "", headers, raw)
    event_bytes = len(json.dumps(event, separators=(",", ":")).encode())
    print(f"\n4 MiB of bytes bodies: request {len(raw):,} B, Lambda event {event_bytes:,} B")
    assert event_bytes < LAMBDA_SYNC_PAYLOAD_BYTES
    status, doc = _post(runtime.url + path, raw)
    assert status == 200 and len(doc["result"]["message_ids"]) == 100
    got = []
    while pulled := client.pull(name, batch_size=100).messages:
        client.ack(name, [m.lease_id for m in pulled])
        got += [base64.b64decode(m.body) for m in pulled]
    assert sorted(got) == sorted(bodies)
    status, doc = _post(runtime.url + path, request(5))  # 4 MiB + 1 byte
    assert status == 413 and doc["errors"][0]["code"] == 10108
