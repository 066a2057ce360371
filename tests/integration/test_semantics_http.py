"""Queue semantics through the real handlers: consumer-group and operations routes, Idempotency-Key,
pause/resume, and the Cloudflare Queues face driven with the bodies of Cloudflare's documentation."""

from __future__ import annotations

import base64
import json

import pytest

CF = "/client/v4/accounts/023e105f4ecef8ad9ca31a8372d0c353/queues"


@pytest.fixture
def queue(api, queue_name) -> str:
    status, body = api("POST", "/v1/queues", {"queue_name": queue_name})
    assert status == 201, body
    return queue_name


def _token(api, queue: str, *scopes: str) -> str:
    status, body = api("POST", "/v1/tokens", {"queue": queue, "scopes": list(scopes)})
    assert status == 201, body
    return body["result"]["token"]


def _pull(api, queue: str, **kw):
    status, body = api("POST", f"/v1/queues/{queue}/messages/pull", {"batch_size": 100, **kw})
    return status, body


# --- Idempotency-Key ------------------------------------------------------------------------------------


def test_same_idempotency_key_twice_stores_one_message(api, queue):
    send = {"messages": [{"body": {"order": 1}}]}
    headers = {"Idempotency-Key": "order-1"}
    s1, first = api("POST", f"/v1/queues/{queue}/messages", send, headers=headers)
    s2, second = api("POST", f"/v1/queues/{queue}/messages", send, headers=headers)
    assert s1 == s2 == 200
    assert first == second  # the first response, ids and offsets included
    _, pulled = _pull(api, queue)
    assert [m["body"] for m in pulled["result"]["messages"]] == [{"order": 1}]
    # the same key on another queue is another request
    other = f"{queue}-b"
    api("POST", "/v1/queues", {"queue_name": other})
    status, third = api("POST", f"/v1/queues/{other}/messages", send, headers=headers)
    assert status == 200 and third["result"]["message_ids"] != first["result"]["message_ids"]


def test_idempotency_key_reused_for_another_request_is_refused(api, queue):
    headers = {"Idempotency-Key": "k-2"}
    api("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 1}]}, headers=headers)
    status, body = api("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 2}]}, headers=headers)
    assert status == 409 and body["errors"][0]["code"] == 10116
    _, pulled = _pull(api, queue)
    assert [m["body"] for m in pulled["result"]["messages"]] == [1]


def test_failed_send_with_a_key_can_be_retried(api, queue):
    headers = {"Idempotency-Key": "k-3"}
    too_many = {"messages": [{"body": n} for n in range(101)]}
    status, body = api("POST", f"/v1/queues/{queue}/messages", too_many, headers=headers)
    assert status == 400
    status, body = api("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 1}]}, headers=headers)
    assert status == 200, body


# --- pause / resume / purge / metrics / groups / redrive ---------------------------------------------------


def test_paused_queue_answers_pulls_409_and_delivers_everything_after_resume(api, queue):
    status, body = api("POST", f"/v1/queues/{queue}/pause")
    assert status == 200 and body["result"]["paused"] is True
    status, _ = api("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": n} for n in range(3)]})
    assert status == 200  # sends still accepted
    status, body = _pull(api, queue)
    assert status == 409 and body["errors"][0]["code"] == 10109
    status, body = api("POST", f"{CF}/{queue}/messages/pull", {"batch_size": 10})
    assert status == 409
    status, body = api("POST", f"/v1/queues/{queue}/resume")
    assert status == 200 and body["result"]["paused"] is False
    status, body = _pull(api, queue)
    assert status == 200 and [m["body"] for m in body["result"]["messages"]] == [0, 1, 2]


def test_group_routes_purge_and_metrics(api, queue):
    status, body = api("POST", f"/v1/queues/{queue}/consumer-groups", {"name": "audit", "start": "earliest"})
    assert status == 201 and body["result"] == {"name": "audit", "start_ms": 0}
    status, body = api("POST", f"/v1/queues/{queue}/consumer-groups", {"name": "audit"})
    assert status == 409 and body["errors"][0]["code"] == 10112
    status, body = api("POST", f"/v1/queues/{queue}/consumer-groups", {"name": "x", "start": "soon"})
    assert status == 400
    status, body = api("GET", f"/v1/queues/{queue}/consumer-groups")
    assert [g["name"] for g in body["result"]["consumer_groups"]] == ["audit", "default"]
    api("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": "x" * 10}] * 4})
    status, body = _pull(api, queue, consumer_group="audit", batch_size=1)
    assert status == 200 and len(body["result"]["messages"]) == 1
    status, body = api("GET", f"/v1/queues/{queue}/metrics")
    assert status == 200
    metrics = body["result"]
    assert metrics["backlog_count"] == 4 and metrics["consumer_groups"]["audit"]["in_flight"] == 1
    status, body = api("POST", f"/v1/queues/{queue}/purge")
    assert status == 200
    _, body = api("GET", f"/v1/queues/{queue}/metrics")
    assert (
        body["result"]["backlog_count"] == 0
        and body["result"]["consumer_groups"]["audit"]["backlog_count"] == 0
    )
    _, body = _pull(api, queue, consumer_group="audit")
    assert body["result"]["messages"] == []
    status, body = api("DELETE", f"/v1/queues/{queue}/consumer-groups/audit")
    assert status == 200
    status, body = api("GET", f"/v1/queues/{queue}/consumer-groups/audit")
    assert status == 404 and body["errors"][0]["code"] == 10111
    # (pullers see the deletion within the shard-map cache TTL; the engine test checks the 404)


def test_scopes_of_operations(api, queue):
    reader = _token(api, queue, "read")
    status, _ = api("GET", f"/v1/queues/{queue}/metrics", token=reader)
    assert status == 200
    status, _ = api("GET", f"/v1/queues/{queue}/consumer-groups", token=reader)
    assert status == 200
    for path in ("purge", "pause", "resume", "consumer-groups"):
        status, _body = api("POST", f"/v1/queues/{queue}/{path}", {"name": "g"}, token=reader)
        assert status == 403, path


def test_redrive_route_needs_admin_on_the_dead_letter_queue_too(api, queue):
    dlq = f"{queue}-dlq"
    api("PATCH", f"/v1/queues/{queue}", {"settings": {"dead_letter_queue": dlq}})
    api("POST", f"/v1/queues/{dlq}/messages", {"messages": [{"body": n} for n in range(3)]})
    admin_of_source = _token(api, queue, "admin")
    status, body = api("POST", f"/v1/queues/{queue}/redrive", {"from": dlq}, token=admin_of_source)
    assert status == 403
    status, body = api("POST", f"/v1/queues/{queue}/redrive", {"from": dlq, "max_messages": 2})
    assert status == 200 and body["result"]["moved"] == 2 and body["result"]["remaining_in_source"] == 1
    _, body = _pull(api, queue)
    assert [(m["body"], m["attempts"]) for m in body["result"]["messages"]] == [(0, 1), (1, 1)]


def test_lease_route_reports_bad_lease_ids(api, queue):
    api("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 1}]})
    _, body = _pull(api, queue, visibility_timeout_ms=5000)
    lease = body["result"]["messages"][0]["lease_id"]
    status, body = api(
        "POST",
        f"/v1/queues/{queue}/messages/lease",
        {"lease_ids": [lease, "forged"], "visibility_timeout_ms": 60000},
    )
    assert status == 200 and body["result"]["extendedCount"] == 1 and len(body["result"]["warnings"]) == 1


# --- Cloudflare face ------------------------------------------------------------------------------------


def test_cloudflare_face_with_the_documented_bodies(api, queue):
    token = _token(api, queue, "read", "write")
    # HTTP publish (Cloudflare docs): one message, then a batch
    status, body = api("POST", f"{CF}/{queue}/messages", {"body": {"greeting": "hello"}}, token=token)
    assert status == 200 and body["success"] is True
    assert body["result"]["metadata"]["metrics"]["backlog_count"] == 1  # Cloudflare's best-effort metrics
    batch = {
        "messages": [
            {"body": "hello world", "content_type": "text"},
            {"body": base64.b64encode(b"\x00\x01raw").decode(), "content_type": "bytes"},
            {"body": [1, 2], "content_type": "json", "delay_seconds": 0},
        ],
        "delay_seconds": 0,
    }
    status, body = api("POST", f"{CF}/{queue}/messages/batch", batch, token=token)
    assert status == 200 and body["success"] is True

    # pull (the curl of Cloudflare's pull-consumer docs): `visibility_timeout` in ms
    status, body = api(
        "POST", f"{CF}/{queue}/messages/pull", {"visibility_timeout": 10000, "batch_size": 2}, token=token
    )
    assert status == 200, body
    result = body["result"]
    assert set(result) == {"messages", "message_backlog_count", "metadata"}
    assert result["message_backlog_count"] == 4 == result["metadata"]["metrics"]["backlog_count"]
    first, second = result["messages"]
    assert set(first) == {"body", "id", "timestamp_ms", "attempts", "lease_id", "metadata"}
    assert json.loads(base64.b64decode(first["body"])) == {"greeting": "hello"}  # json: base64
    assert first["metadata"]["CF-Content-Type"] == "json" and first["attempts"] == 1
    assert second["body"] == "hello world" and second["metadata"]["CF-Content-Type"] == "text"  # text: plain
    status, body = api(
        "POST", f"{CF}/{queue}/messages/pull", {"visibility_timeout_ms": 10000, "batch_size": 10}, token=token
    )
    third, fourth = body["result"]["messages"]
    assert base64.b64decode(third["body"]) == b"\x00\x01raw"  # bytes: base64 of the raw bytes
    assert json.loads(base64.b64decode(fourth["body"])) == [1, 2]

    # ack + retry (Cloudflare docs' body), plus a made-up lease id
    ack = {
        "acks": [{"lease_id": first["lease_id"]}, {"lease_id": third["lease_id"]}, {"lease_id": "made-up"}],
        "retries": [{"lease_id": second["lease_id"]}, {"lease_id": fourth["lease_id"], "delay_seconds": 600}],
    }
    status, body = api("POST", f"{CF}/{queue}/messages/ack", ack, token=token)
    assert status == 200
    assert body["result"]["ackCount"] == 2 and body["result"]["retryCount"] == 2
    assert len(body["result"]["warnings"]) == 1
    status, body = api("POST", f"{CF}/{queue}/messages/pull", {"batch_size": 10}, token=token)
    (again,) = body["result"]["messages"]  # the retried text message; the 600 s one waits
    assert again["body"] == "hello world" and again["attempts"] == 2


def test_cloudflare_face_scopes_and_errors(api, queue):
    writer = _token(api, queue, "write")
    reader = _token(api, queue, "read")
    status, _ = api("POST", f"{CF}/{queue}/messages/pull", {"batch_size": 1}, token=writer)
    assert status == 403
    status, _ = api("POST", f"{CF}/{queue}/messages/ack", {"acks": []}, token=reader)
    assert status == 403  # acking changes state: read + write, as Cloudflare's pull consumers
    status, body = api("POST", f"{CF}/{queue}/messages/pull", {"batch_size": 101})
    assert status == 400 and body["success"] is False
    status, body = api("POST", f"{CF}/nope-{queue}/messages", {"body": 1})
    assert status == 404 and body["errors"][0]["code"] == 10104
