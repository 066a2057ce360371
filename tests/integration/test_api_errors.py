"""Bad input gets the documented status and error code, and changes nothing."""

from __future__ import annotations

import pytest

from tests.conftest import ADMIN_TOKEN


@pytest.fixture
def queue(api, queue_name):
    status, _ = api("POST", "/v1/queues", {"queue_name": queue_name, "settings": {"max_message_bytes": 1000}})
    assert status == 201
    return queue_name


def backlog(api, queue) -> int:
    status, body = api(
        "POST", f"/v1/queues/{queue}/messages/pull", {"batch_size": 100, "visibility_timeout_ms": 1}
    )
    assert status == 200
    return len(body["result"]["messages"])


def error_code(body) -> int:
    assert body["success"] is False and body["result"] is None
    assert body["errors"][0]["message"]
    return body["errors"][0]["code"]


def test_malformed_json(api, queue):
    status, body = api("POST", f"/v1/queues/{queue}/messages", raw=b'{"messages": [')
    assert (status, error_code(body)) == (400, 10101)
    assert backlog(api, queue) == 0


def test_unknown_queue(api):
    status, body = api("POST", "/v1/queues/no-such-queue/messages", {"messages": [{"body": 1}]})
    assert (status, error_code(body)) == (404, 10104)


def test_a_batch_of_101_messages(api, queue):
    status, body = api(
        "POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": i} for i in range(101)]}
    )
    assert (status, error_code(body)) == (400, 10106)
    assert backlog(api, queue) == 0


def test_a_message_over_max_message_bytes(api, queue):
    batch = {"messages": [{"body": "ok"}, {"body": "x" * 2000}]}
    status, body = api("POST", f"/v1/queues/{queue}/messages", batch)
    assert (status, error_code(body)) == (413, 10107)
    assert "message 1" in body["errors"][0]["message"]
    assert backlog(api, queue) == 0  # the valid first message was not stored either


@pytest.mark.parametrize("size", [0, 101])
def test_batch_size_out_of_range(api, queue, size):
    api("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 1}]})
    status, body = api("POST", f"/v1/queues/{queue}/messages/pull", {"batch_size": size})
    assert (status, error_code(body)) == (400, 10100)
    assert "batch_size" in body["errors"][0]["message"]
    assert backlog(api, queue) == 1  # nothing was leased by the bad pull


def test_missing_token(api, queue):
    status, body = api("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 1}]}, token=None)
    assert (status, error_code(body)) == (401, 10001)
    status, body = api("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 1}]}, token="wrong")
    assert (status, error_code(body)) == (401, 10001)
    assert backlog(api, queue) == 0


def test_a_read_only_token_cannot_send(api, queue):
    status, body = api("POST", "/v1/tokens", {"queue": queue, "scopes": ["read"]})
    assert status == 201
    reader = body["result"]["token"]
    status, body = api("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 1}]}, token=reader)
    assert (status, error_code(body)) == (403, 10002)
    assert backlog(api, queue) == 0
    status, _ = api("POST", f"/v1/queues/{queue}/messages/pull", {"batch_size": 1}, token=reader)
    assert status == 200


def test_a_token_for_another_queue_learns_nothing(api, queue):
    _, body = api("POST", "/v1/tokens", {"queue": "other-queue", "scopes": ["read", "write"]})
    other = body["result"]["token"]
    for path in (f"/v1/queues/{queue}/messages/pull", "/v1/queues/does-not-exist/messages/pull"):
        status, body = api("POST", path, {"batch_size": 1}, token=other)
        assert (status, error_code(body)) == (403, 10002)  # same answer whether or not it exists


def test_invalid_bodies_and_settings(api, queue, queue_name):
    cases = [
        ({"messages": [{"body": "not base64!", "content_type": "bytes"}]}, 10100),
        ({"messages": [{"body": 5, "content_type": "text"}]}, 10100),
        ({"messages": "nope"}, 10100),
    ]
    for payload, code in cases:
        status, body = api("POST", f"/v1/queues/{queue}/messages", payload)
        assert (status, error_code(body)) == (400, code), payload
    status, body = api("POST", "/v1/queues", {"queue_name": "bad name!"})
    assert (status, error_code(body)) == (400, 10102)
    status, body = api(
        "POST", "/v1/queues", {"queue_name": queue_name + "x", "settings": {"max_retries": 1000}}
    )
    assert (status, error_code(body)) == (400, 10103)
    status, body = api("POST", "/v1/queues", {"queue_name": queue})
    assert (status, error_code(body)) == (409, 10105)
    assert backlog(api, queue) == 0


def test_revoked_tokens_stop_working(api, queue):
    _, body = api("POST", "/v1/tokens", {"queue": "*", "scopes": ["admin"]})
    token_id, token = body["result"]["token_id"], body["result"]["token"]
    _, listing = api("GET", "/v1/tokens")
    assert token_id in {t["token_id"] for t in listing["result"]} and "token" not in listing["result"][0]
    assert api("DELETE", f"/v1/tokens/{token_id}")[0] == 200
    from lambdas.common.runtime import service

    service().tokens._cache.clear()  # what the cache TTL does in a Lambda container
    assert api("GET", "/v1/queues", token=token)[0] == 401
    assert token != ADMIN_TOKEN
