"""Every queue call of the installed official `cloudflare` SDK against a Sluice URL, each answer
validated strictly against the SDK's own model. Run as a script (one SDK generation per process: 4.x and
5.x are both `cloudflare`): `python cloudflare_sdk_calls.py URL TOKEN PREFIX` prints a JSON report
`{"version", "calls": {name: result}}` and exits non-zero on the first failure."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import cloudflare
from cloudflare import Cloudflare
from cloudflare.types import queues as types
from pydantic import TypeAdapter

ACCOUNT = "0123456789abcdef0123456789abcdef"
V5 = int(cloudflare.__version__.split(".")[0]) >= 5


def strict(model: Any, raw: Any, *, envelope: bool) -> Any:
    """The SDK model validated strictly against the raw JSON (the `result`, or the whole body)."""
    doc = raw.http_response.json()
    assert doc["success"] is True and doc["errors"] == [], doc
    payload = doc if envelope else doc["result"]
    TypeAdapter(model).validate_json(json.dumps(payload), strict=True)
    raw.parse()  # and the SDK's own parsing
    return payload


def main(url: str, token: str, prefix: str) -> dict[str, Any]:
    client = Cloudflare(api_token=token, base_url=f"{url}/client/v4", max_retries=0)
    q, raw = client.queues, client.queues.with_raw_response
    calls: dict[str, Any] = {}

    def call(name: str, model: Any, fn: Callable[[], Any], *, envelope: bool = False) -> Any:
        calls[name] = strict(model, fn(), envelope=envelope)
        return calls[name]

    name = f"{prefix}-q"
    created = call("queues.create", types.Queue, lambda: raw.create(account_id=ACCOUNT, queue_name=name))
    qid = created["queue_id"]
    assert len(qid) == 32 and created["queue_name"] == name
    call("queues.get", types.Queue, lambda: raw.get(qid, account_id=ACCOUNT))
    listed = call("queues.list", list[types.Queue], lambda: raw.list(account_id=ACCOUNT))
    assert qid in {x["queue_id"] for x in listed}
    settings = {"delivery_delay": 0, "message_retention_period": 3600}
    updated = call(
        "queues.update",
        types.Queue,
        lambda: raw.update(qid, account_id=ACCOUNT, queue_name=name, settings=settings),
    )
    assert updated["settings"]["message_retention_period"] == 3600
    edited = call(
        "queues.edit",
        types.Queue,
        lambda: raw.edit(qid, account_id=ACCOUNT, settings={"delivery_paused": False}),
    )
    assert edited["settings"]["message_retention_period"] == 3600  # PATCH keeps what it was not given

    messages = q.messages.with_raw_response
    push_model = types.MessagePushResponse
    pushed = call(
        "messages.push",
        push_model,
        lambda: messages.push(qid, account_id=ACCOUNT, body={"n": 1}, content_type="json"),
        envelope=not V5,
    )
    bulk = [{"body": "two", "content_type": "text"}, {"body": {"n": 3}, "content_type": "json"}]
    call(
        "messages.bulk_push",
        types.MessageBulkPushResponse,
        lambda: messages.bulk_push(qid, account_id=ACCOUNT, messages=bulk, delay_seconds=0),
        envelope=not V5,
    )
    metadata = pushed["metadata"] if V5 else pushed["result"]["metadata"]
    assert metadata["metrics"]["backlog_count"] == 1
    assert metadata["metrics"]["oldest_message_timestamp_ms"] > 0
    pulled = call(
        "messages.pull",
        types.MessagePullResponse,
        lambda: messages.pull(qid, account_id=ACCOUNT, batch_size=3, visibility_timeout_ms=30_000),
    )
    leases = [m["lease_id"] for m in pulled["messages"]]
    assert len(leases) == 3 and pulled["message_backlog_count"] == 3
    acked = call(
        "messages.ack",
        types.MessageAckResponse,
        lambda: messages.ack(
            qid,
            account_id=ACCOUNT,
            acks=[{"lease_id": leases[0]}, {"lease_id": "not-a-lease"}],
            retries=[{"lease_id": leases[1], "delay_seconds": 0}],
        ),
    )
    assert acked["ackCount"] == 1 and acked["retryCount"] == 1
    assert isinstance(acked["warnings"], dict if V5 else list) and len(acked["warnings"]) == 1
    if V5:
        metrics = call(
            "queues.get_metrics",
            types.QueueGetMetricsResponse,
            lambda: raw.get_metrics(qid, account_id=ACCOUNT),
        )
        assert metrics["backlog_count"] == 2, metrics

    purge = q.purge.with_raw_response
    call(
        "purge.start",
        types.Queue,
        lambda: purge.start(qid, account_id=ACCOUNT, delete_messages_permanently=True),
    )
    status = call("purge.status", types.PurgeStatusResponse, lambda: purge.status(qid, account_id=ACCOUNT))
    assert status["completed"] == "true" and status["started_at"]
    drained = q.messages.pull(qid, account_id=ACCOUNT, batch_size=10)
    assert drained is not None and drained.messages == []

    consumers = q.consumers.with_raw_response
    http = call(
        "consumers.create(http_pull)",
        types.Consumer,
        lambda: consumers.create(
            qid,
            account_id=ACCOUNT,
            type="http_pull",
            dead_letter_queue=f"{prefix}-dlq",
            settings={"batch_size": 7, "max_retries": 4, "visibility_timeout_ms": 20_000, "retry_delay": 1.5},
        ),
    )
    assert http["settings"] == {
        "batch_size": 7,
        "max_retries": 4,
        "retry_delay": 2,
        "visibility_timeout_ms": 20_000,
    }, http
    worker = call(
        "consumers.create(worker)",
        types.Consumer,
        lambda: consumers.create(
            qid,
            account_id=ACCOUNT,
            type="worker",
            script_name="https://example.com/hook",
            settings={"batch_size": 10, "max_retries": 2, "max_wait_time_ms": 500},
        ),
    )
    cid = worker["consumer_id"]
    call(
        "consumers.update",
        types.Consumer,
        lambda: consumers.update(
            cid,
            account_id=ACCOUNT,
            queue_id=qid,
            type="worker",
            script_name="https://example.com/hook2",
            settings={"batch_size": 20},
        ),
    )
    if V5:
        got = call(
            "consumers.get", types.Consumer, lambda: consumers.get(cid, account_id=ACCOUNT, queue_id=qid)
        )
        listed_consumers = call(
            "consumers.list", list[types.Consumer], lambda: consumers.list(qid, account_id=ACCOUNT)
        )
    else:  # 4.x's `get` is the list (GET .../consumers); it has no single-consumer get
        listed_consumers = call(
            "consumers.get", list[types.Consumer], lambda: consumers.get(qid, account_id=ACCOUNT)
        )
        got = next(c for c in listed_consumers if c["consumer_id"] == cid)
    assert got["script_name"] == "https://example.com/hook2" and got["settings"]["batch_size"] == 20
    assert {c["type"] for c in listed_consumers} == {"http_pull", "worker"}
    for consumer_id in (cid, http["consumer_id"]):
        call(
            "consumers.delete",
            types.ConsumerDeleteResponse,
            lambda consumer_id=consumer_id: consumers.delete(consumer_id, account_id=ACCOUNT, queue_id=qid),
            envelope=True,
        )
    if V5:  # peek reads without leasing; purge removes peeked messages that were delivered
        msgs = q.messages.with_raw_response
        q.messages.push(qid, account_id=ACCOUNT, body="peek me", content_type="text")
        lease = q.messages.pull(qid, account_id=ACCOUNT, batch_size=1).messages[0].lease_id
        assert lease
        peeked = call(
            "messages.peek",
            types.MessagePeekResponse,
            lambda: msgs.peek(qid, account_id=ACCOUNT, batch_size=5),
        )
        (message,) = peeked["messages"]
        assert message["body"] == "peek me" and message["attempts"] == 1
        purged = call(
            "messages.purge",
            types.MessagePurgeResponse,
            lambda: msgs.purge(qid, account_id=ACCOUNT, refs=[{"ref": message["ref"]}]),
        )
        assert purged == {"errors": [], "warnings": {}}, purged
        assert q.messages.peek(qid, account_id=ACCOUNT).messages == []
    delete = raw.delete
    call("queues.delete", types.QueueDeleteResponse, lambda: delete(qid, account_id=ACCOUNT), envelope=True)
    q.delete(f"{prefix}-dlq", account_id=ACCOUNT)  # the http_pull consumer's dead letter queue, by name
    try:
        q.get(qid, account_id=ACCOUNT)
        raise AssertionError("a deleted queue was found")
    except cloudflare.NotFoundError as exc:
        assert exc.status_code == 404
    return {"version": cloudflare.__version__, "calls": sorted(calls)}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
