"""`POST /v1/queues/{q}/messages/peek` on the native face: a group's unacked messages in the native body
shape, without leasing them or counting a delivery (the Cloudflare face's peek, same engine walk)."""

from __future__ import annotations

import base64
from typing import Any


def _peek(api: Any, queue: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
    return api("POST", f"/v1/queues/{queue}/messages/peek", body, **kw)


def test_peek_shows_unacked_messages_in_the_native_shape_and_leases_nothing(api, queue_name):
    assert api("POST", "/v1/queues", {"queue_name": queue_name})[0] == 201
    messages = [
        {"body": {"order": 1}},
        {"body": "plain", "content_type": "text", "attributes": {"k": "v"}},
        {"body": base64.b64encode(b"\x00\xff").decode(), "content_type": "bytes"},
    ]
    sent = api("POST", f"/v1/queues/{queue_name}/messages", {"messages": messages})[1]["result"]
    leased = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 1})[1]["result"]["messages"]

    status, body = _peek(api, queue_name, {"batch_size": 10})
    peeked = body["result"]["messages"]
    assert status == 200 and [m["id"] for m in peeked] == sent["message_ids"]
    assert [(m["body"], m["content_type"], m["attempts"]) for m in peeked] == [
        ({"order": 1}, "json", 1),  # in flight: delivered once
        ("plain", "text", 0),
        ("AP8=", "bytes", 0),
    ]
    assert peeked[1]["attributes"] == {"k": "v"} and "lease_id" not in peeked[0]
    assert _peek(api, queue_name)[1]["result"]["messages"] == peeked  # no body: the defaults (5, default)
    assert _peek(api, queue_name, {"batch_size": 1})[1]["result"]["messages"] == peeked[:1]
    pulled = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 10})[1]["result"]
    assert [m["attempts"] for m in pulled["messages"]] == [1, 1]  # peeks counted no delivery
    assert leased[0]["id"] not in [m["id"] for m in pulled["messages"]]


def test_peek_reads_the_group_asked_for(api, queue_name):
    assert api("POST", "/v1/queues", {"queue_name": queue_name})[0] == 201
    api("POST", f"/v1/queues/{queue_name}/messages", {"messages": [{"body": 1}, {"body": 2}]})
    api("POST", f"/v1/queues/{queue_name}/consumer-groups", {"name": "audit", "start": "latest"})
    api("POST", f"/v1/queues/{queue_name}/messages", {"messages": [{"body": 3}]})
    audit = _peek(api, queue_name, {"consumer_group": "audit"})[1]["result"]["messages"]
    assert [m["body"] for m in audit] == [3]
    status, body = _peek(api, queue_name, {"consumer_group": "nobody"})
    assert status == 404 and "consumer group 'nobody' not found" in body["errors"][0]["message"]


def test_bad_peeks_are_refused_and_scopes_apply(api, queue_name):
    assert api("POST", "/v1/queues", {"queue_name": queue_name})[0] == 201
    for bad in ({"batch_size": 0}, {"batch_size": 101}, {"batch_size": "5"}, {"size": 5}):
        status, body = _peek(api, queue_name, bad)
        assert status == 400 and body["errors"][0]["code"] == 10100, bad
    writer = api("POST", "/v1/tokens", {"queue": queue_name, "scopes": ["write"]})[1]["result"]["token"]
    reader = api("POST", "/v1/tokens", {"queue": queue_name, "scopes": ["read"]})[1]["result"]["token"]
    assert _peek(api, queue_name, token=writer)[0] == 403
    assert _peek(api, queue_name, token=reader)[0] == 200
    assert _peek(api, f"{queue_name}-missing")[0] == 404
