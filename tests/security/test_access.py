"""Who may do what: tokens, scopes, queue binding, lease ids, and hostile bodies (docs/security.md)."""

from __future__ import annotations

import base64

import pytest


@pytest.fixture
def queue(api, queue_name):
    status, body = api("POST", "/v1/queues", {"queue_name": queue_name})
    assert status == 201, body
    return queue_name


def _token(api, queue: str, scopes: list[str]) -> str:
    status, body = api("POST", "/v1/tokens", {"queue": queue, "scopes": scopes})
    assert status == 201, body
    return body["result"]["token"]


def _code(body) -> int:
    return body["errors"][0]["code"]


def _send(api, queue, token, messages=None):
    return api("POST", f"/v1/queues/{queue}/messages", {"messages": messages or [{"body": 1}]}, token=token)


def _pull(api, queue, token="test-admin-token", **extra):
    return api("POST", f"/v1/queues/{queue}/messages/pull", {"batch_size": 10, **extra}, token=token)


def _backlog(api, queue) -> int:
    _status, body = _pull(api, queue, batch_size=1, visibility_timeout_ms=1)
    return body["result"]["message_backlog_count"]


# --- authentication ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},  # no Authorization header at all
        {"authorization": "Bearer "},
        {"authorization": "Bearer sluice_not-a-real-token"},
        {"authorization": "Basic dXNlcjpwYXNz"},
    ],
)
def test_missing_or_invalid_token_is_401_and_changes_nothing(api, queue, headers):
    status, body = api(
        "POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": 1}]}, token=None, headers=headers
    )
    assert status == 401 and _code(body) == 10001
    assert _backlog(api, queue) == 0


def test_unknown_queue_and_forbidden_queue_look_the_same_to_a_stranger(api, queue):
    """Auth runs before routing to the engine: no token learns whether a queue exists."""
    s1, b1 = api("GET", f"/v1/queues/{queue}", token="wrong")
    s2, b2 = api("GET", "/v1/queues/no-such-queue-here", token="wrong")
    assert (s1, b1) == (s2, b2) and s1 == 401


def test_revoked_token_stops_working(api, queue, engine):
    status, created = api("POST", "/v1/tokens", {"queue": queue, "scopes": ["write"]})
    token, token_id = created["result"]["token"], created["result"]["token_id"]
    assert _send(api, queue, token)[0] == 200
    assert api("DELETE", f"/v1/tokens/{token_id}")[0] == 200
    engine.tokens._cache.clear()  # other containers forget it within the cache TTL
    from lambdas.common.runtime import service

    service().tokens._cache.clear()
    status, body = _send(api, queue, token)
    assert status == 401 and _code(body) == 10001


# --- authorization ---------------------------------------------------------------------------------


def test_wrong_scope_is_403(api, queue):
    reader = _token(api, queue, ["read"])
    writer = _token(api, queue, ["write"])
    status, body = _send(api, queue, reader)
    assert status == 403 and _code(body) == 10002
    status, body = _pull(api, queue, writer)
    assert status == 403 and _code(body) == 10002
    for method, path, payload in [
        ("POST", "/v1/queues", {"queue_name": "sneaky"}),
        ("POST", "/v1/tokens", {"queue": "*", "scopes": ["admin"]}),
        ("DELETE", f"/v1/queues/{queue}", None),
        ("PATCH", f"/v1/queues/{queue}", {"settings": {"max_retries": 9}}),
    ]:
        status, body = api(method, path, payload, token=writer)
        assert status == 403, (method, path, body)
    assert api("GET", f"/v1/queues/{queue}")[1]["result"]["settings"]["max_retries"] == 3


def test_a_token_bound_to_one_queue_cannot_touch_another(api, queue, queue_name):
    other = f"{queue_name}-other"
    assert api("POST", "/v1/queues", {"queue_name": other})[0] == 201
    token = _token(api, queue, ["read", "write"])
    assert _send(api, queue, token)[0] == 200
    status, body = _send(api, other, token)
    assert status == 403 and _code(body) == 10002
    status, body = _pull(api, other, token)
    assert status == 403
    assert _backlog(api, other) == 0


# --- lease ids ---------------------------------------------------------------------------------


def test_forged_lease_ids_are_ignored_with_a_warning(api, queue):
    assert _send(api, queue, "test-admin-token")[0] == 200
    status, pulled = _pull(api, queue)
    real = pulled["result"]["messages"][0]["lease_id"]
    raw = bytearray(base64.urlsafe_b64decode(real + "=" * (-len(real) % 4)))
    raw[3] ^= 0x01  # another sequence number, same MAC
    tampered = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    for forged in [tampered, "A" * 40, "!!!not-base64!!!", real[:-2]]:
        status, body = api("POST", f"/v1/queues/{queue}/messages/ack", {"acks": [{"lease_id": forged}]})
        assert status == 200 and body["result"]["ackCount"] == 0, forged
        assert body["result"]["warnings"]
    status, body = api("POST", f"/v1/queues/{queue}/messages/ack", {"acks": [{"lease_id": real}]})
    assert body["result"]["ackCount"] == 1


def test_a_lease_id_from_another_queue_is_useless(api, queue, queue_name):
    other = f"{queue_name}-b"
    api("POST", "/v1/queues", {"queue_name": other})
    _send(api, queue, "test-admin-token")
    _send(api, other, "test-admin-token")
    lease = _pull(api, queue)[1]["result"]["messages"][0]["lease_id"]
    _status, body = api("POST", f"/v1/queues/{other}/messages/ack", {"acks": [{"lease_id": lease}]})
    assert body["result"]["ackCount"] == 0 and body["result"]["warnings"]
    assert _pull(api, other, visibility_timeout_ms=1)[1]["result"]["message_backlog_count"] == 1


def test_a_replayed_ack_does_nothing_the_second_time(api, queue, clocked, clock):
    _send(api, queue, "test-admin-token")
    lease = _pull(api, queue)[1]["result"]["messages"][0]["lease_id"]
    first = api("POST", f"/v1/queues/{queue}/messages/ack", {"acks": [{"lease_id": lease}]})[1]
    second = api("POST", f"/v1/queues/{queue}/messages/ack", {"acks": [{"lease_id": lease}]})[1]
    assert first["result"]["ackCount"] == 1
    assert second["result"]["ackCount"] == 0 and "already acked" in second["result"]["warnings"][0]


def test_a_replayed_old_lease_cannot_extend_a_newer_delivery(api, queue):
    _send(api, queue, "test-admin-token")
    old = _pull(api, queue, visibility_timeout_ms=1)[1]["result"]["messages"][0]
    import time

    time.sleep(0.01)
    new = _pull(api, queue)[1]["result"]["messages"][0]
    assert new["id"] == old["id"] and new["attempts"] == 2
    status, body = api(
        "POST",
        f"/v1/queues/{queue}/messages/lease",
        {"lease_ids": [old["lease_id"]], "visibility_timeout_ms": 60_000},
    )
    assert status == 200 and body["result"]["extendedCount"] == 0 and body["result"]["warnings"]


# --- hostile bodies ---------------------------------------------------------------------------------


def test_oversized_message_and_request_are_413_and_store_nothing(api, queue):
    big = "x" * 131_073
    status, body = _send(api, queue, "test-admin-token", [{"body": big, "content_type": "text"}])
    assert status == 413 and _code(body) == 10107
    many = [{"body": "y" * 100_000, "content_type": "text"}] * 42  # 4.2 MB: over the native 4 MiB
    status, body = _send(api, queue, "test-admin-token", many)
    assert status == 413 and _code(body) == 10108
    status, body = _send(api, queue, "test-admin-token", [{"body": 1}] * 101)
    assert status == 400 and _code(body) == 10106
    assert _backlog(api, queue) == 0


def test_deeply_nested_json_is_a_400_not_a_crash(api, queue):
    deep = "[" * 100_000 + "]" * 100_000
    raw = ('{"messages": [{"body": ' + deep + "}]}").encode()
    status, body = api("POST", f"/v1/queues/{queue}/messages", raw=raw)
    assert status == 400, body
    assert _backlog(api, queue) == 0


def test_nested_but_reasonable_json_body_round_trips(api, queue):
    nested: object = 1
    for _ in range(50):
        nested = {"a": nested}
    assert _send(api, queue, "test-admin-token", [{"body": nested}])[0] == 200
    assert _pull(api, queue)[1]["result"]["messages"][0]["body"] == nested


@pytest.mark.parametrize("bad", ["not base64!", "abc", "YWJj\x00", 12])
def test_invalid_base64_bytes_body_is_400(api, queue, bad):
    status, body = _send(api, queue, "test-admin-token", [{"body": bad, "content_type": "bytes"}])
    assert status == 400 and _code(body) == 10100, body
    assert _backlog(api, queue) == 0


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"\xff\xfe\x00",
        b"[]",
        b'{"messages": "nope"}',
        b'{"messages": [null]}',
    ],
)
def test_malformed_bodies_are_400(api, queue, raw):
    status, body = api("POST", f"/v1/queues/{queue}/messages", raw=raw)
    assert status == 400, (raw, body)


# --- what a token sees and how long it lives --------------------------------------------------------


def test_a_token_bound_to_one_queue_lists_that_queue_only(api, queue, queue_name):
    other = f"{queue_name}-other"
    assert api("POST", "/v1/queues", {"queue_name": other})[0] == 201
    listed = api("GET", "/v1/queues", token=_token(api, queue, ["read"]))[1]["result"]
    assert [q["queue_name"] for q in listed["queues"]] == [queue] and listed["cursor"] is None
    everything = api("GET", "/v1/queues", query="limit=1000")[1]["result"]["queues"]
    assert {queue, other} <= {q["queue_name"] for q in everything}
    assert api("GET", "/v1/queues", token=_token(api, f"{queue_name}-gone", ["read"]))[1]["result"] == {
        "queues": [],
        "cursor": None,
    }
    status, body = api("GET", "/v1/queues", token=_token(api, queue, ["write"]))
    assert status == 403 and _code(body) == 10002


def test_a_token_with_a_lifetime_is_refused_once_it_has_expired(api, engine, queue):
    import time

    before = engine.backend.clock()
    status, body = api("POST", "/v1/tokens", {"queue": queue, "scopes": ["read"], "expires_in_seconds": 60})
    assert (
        status == 201 and before + 60_000 <= body["result"]["expires_on"] <= engine.backend.clock() + 60_000
    )
    listed = {t["token_id"]: t for t in api("GET", "/v1/tokens")[1]["result"]}
    assert listed[body["result"]["token_id"]]["expires_on"] == body["result"]["expires_on"]
    assert api("GET", f"/v1/queues/{queue}", token=body["result"]["token"])[0] == 200

    _id, brief = engine.tokens.create(queue, ["read"], expires_ms=engine.backend.clock() + 300)
    assert api("GET", f"/v1/queues/{queue}", token=brief)[0] == 200  # cached from here on
    time.sleep(0.35)
    status, body = api("GET", f"/v1/queues/{queue}", token=brief)
    assert status == 401 and _code(body) == 10001
    assert body["errors"][0]["message"].startswith("token expired at ")
    assert body["errors"][0]["message"].endswith(": mint a new one")


def test_a_token_lifetime_out_of_range_is_refused(api, queue):
    for lifetime in (0, -5, 10 * 365 * 86_400 + 1, "60", 1.5):
        body = {"queue": queue, "scopes": ["read"], "expires_in_seconds": lifetime}
        status, answer = api("POST", "/v1/tokens", body)
        assert status == 400 and _code(answer) == 10100, lifetime
