"""Hostile inputs (issue 18): each is answered through the real handlers with a 4xx and its stable error
code, and changes nothing: the queue index, the tokens, the queues' metrics and consumer groups are
the same before and after. docs/security.md lists each case against this test."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sluice import offsets
from sluice.engine import keys
from tests.conftest import Api

Q = f"hq-{uuid.uuid4().hex[:8]}"  # max_message_bytes 1000, dead letter queue DLQ
DLQ = f"{Q}-dlq"
OTHER = f"{Q}-other"  # an ordinary queue: not Q's dead letter queue
STREAM = f"hs-{uuid.uuid4().hex[:8]}/events"
CF = f"/client/v4/accounts/acc/queues/{Q}"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def world(engine) -> Api:
    api = Api()
    for name, settings in (
        (Q, {"max_message_bytes": 1000, "dead_letter_queue": DLQ}),
        (OTHER, {}),
    ):
        assert api("POST", "/v1/queues", {"queue_name": name, "settings": settings})[0] == 201
    assert api("POST", f"/v1/queues/{Q}/messages", {"messages": [{"body": i} for i in range(3)]})[0] == 200
    assert api("POST", f"/v1/queues/{OTHER}/messages", {"messages": [{"body": 1}]})[0] == 200
    assert api("POST", f"/streams/{STREAM}", raw=b'{"records": [1, 2]}')[0] == 200
    return api


def snapshot(engine, api: Api) -> dict[str, Any]:
    """Everything a hostile request could have changed."""
    index = [item["sk"] for item in engine.backend.control.query(keys.QUEUE_INDEX_PK, consistent=True)]
    state: dict[str, Any] = {"queues": index, "tokens": sorted(t["token_id"] for t in engine.tokens.list())}
    for name in (Q, DLQ, OTHER):
        status, body = api("GET", f"/v1/queues/{name}/metrics")
        assert status == 200
        m = body["result"]
        state[name] = (m["backlog_count"], m["in_flight"], m["delayed"], sorted(m["consumer_groups"]))
        state[name + "/doc"] = api("GET", f"/v1/queues/{name}")[1]["result"]
    status, body = api("GET", f"/streams/{STREAM}", query="offset=-&limit=100")
    state["stream"] = (status, body)
    return state


def past_head() -> str:
    return offsets.encode(0, 1000)


# (id, method, path, body or raw bytes, query string, status, code); code None: the Durable Streams
# face, whose error body is {"error": ...} without a code.
CASES: list[tuple[str, str, str, Any, str, int, int | None]] = [
    # names: one anchored rule for queues, groups, tokens, consumers and streams
    ("queue name with a trailing newline", "POST", "/v1/queues", {"queue_name": "qa\n"}, "", 400, 10102),
    ("queue name '../x'", "POST", "/v1/queues", {"queue_name": "../x"}, "", 400, 10102),
    ("queue name of 64 characters", "POST", "/v1/queues", {"queue_name": "a" * 64}, "", 400, 10102),
    ("queue name not a string", "POST", "/v1/queues", {"queue_name": 5}, "", 400, 10100),
    (
        "DLQ name with a newline",
        "POST",
        "/v1/queues",
        {"queue_name": f"{Q}-n", "settings": {"dead_letter_queue": "d\n"}},
        "",
        400,
        10103,
    ),
    ("token bound to '../x'", "POST", "/v1/tokens", {"queue": "../x", "scopes": ["read"]}, "", 400, 10102),
    (
        "token bound to 1000 characters",
        "POST",
        "/v1/tokens",
        {"queue": "a" * 1000, "scopes": ["read"]},
        "",
        400,
        10102,
    ),
    ("token bound to 'qa\\n'", "POST", "/v1/tokens", {"queue": "qa\n", "scopes": ["read"]}, "", 400, 10102),
    (
        "token bound to a stream name with '..'",
        "POST",
        "/v1/tokens",
        {"queue": "a/../b", "scopes": ["read"]},
        "",
        400,
        10102,
    ),
    ("token with an unknown scope", "POST", "/v1/tokens", {"queue": Q, "scopes": ["root"]}, "", 400, 10100),
    ("group name with a newline", "POST", f"/v1/queues/{Q}/consumer-groups", {"name": "g\n"}, "", 400, 10100),
    (
        "pull for a group named '../g'",
        "POST",
        f"/v1/queues/{Q}/messages/pull",
        {"consumer_group": "../g"},
        "",
        400,
        10100,
    ),
    (
        "push consumer id with a newline",
        "POST",
        f"/v1/queues/{Q}/consumers",
        {"id": "c\n", "type": "webhook", "url": "https://example.com/hook"},
        "",
        400,
        10124,
    ),
    # numbers within their documented ranges
    (
        "group start 2^63",
        "POST",
        f"/v1/queues/{Q}/consumer-groups",
        {"name": "g1", "start": 2**63},
        "",
        400,
        10100,
    ),
    (
        "group start as a digit string",
        "POST",
        f"/v1/queues/{Q}/consumer-groups",
        {"name": "g2", "start": "1700000000000"},
        "",
        400,
        10100,
    ),
    (
        "group start true",
        "POST",
        f"/v1/queues/{Q}/consumer-groups",
        {"name": "g3", "start": True},
        "",
        400,
        10100,
    ),
    (
        "redrive max_messages 2^63",
        "POST",
        f"/v1/queues/{Q}/redrive",
        {"from": DLQ, "max_messages": 2**63},
        "",
        400,
        10100,
    ),
    (
        "redrive from a queue that is not the DLQ",
        "POST",
        f"/v1/queues/{Q}/redrive",
        {"from": OTHER},
        "",
        400,
        10131,
    ),
    ("redrive from itself", "POST", f"/v1/queues/{Q}/redrive", {"from": Q}, "", 400, 10131),
    (
        "native ?version= of 41 digits",
        "POST",
        f"/v1/queues/{Q}/messages",
        {"messages": [{"body": 1}]},
        "version=" + "9" * 41,
        400,
        10100,
    ),
    (
        "native ?version= 2^63",
        "POST",
        f"/v1/queues/{Q}/messages",
        {"messages": [{"body": 1}]},
        f"version={2**63}",
        400,
        10100,
    ),
    (
        "retention of 10^40 seconds",
        "PATCH",
        f"/v1/queues/{Q}",
        {"settings": {"retention_seconds": 10**40, "bottomless": True}},
        "",
        400,
        10103,
    ),
    ("records ?start= past 16 digits", "GET", f"/v1/queues/{Q}/records", None, f"start={10**16}", 400, 10100),
    ("records ?shard= 2^63", "GET", f"/v1/queues/{Q}/records", None, f"shard={2**63}", 400, 10100),
    # strict types: no coercion
    ("batch_size '5'", "POST", f"/v1/queues/{Q}/messages/pull", {"batch_size": "5"}, "", 400, 10100),
    ("batch_size true", "POST", f"/v1/queues/{Q}/messages/pull", {"batch_size": True}, "", 400, 10100),
    (
        "delay_seconds '5'",
        "POST",
        f"/v1/queues/{Q}/messages",
        {"messages": [{"body": 1, "delay_seconds": "5"}]},
        "",
        400,
        10100,
    ),
    (
        "setting max_retries '5'",
        "PATCH",
        f"/v1/queues/{Q}",
        {"settings": {"max_retries": "5"}},
        "",
        400,
        10103,
    ),
    ("setting ordered 1", "PATCH", f"/v1/queues/{Q}", {"settings": {"ordered": 1}}, "", 400, 10103),
    (
        # Native only: Cloudflare's face rounds fractional delays up (its SDK sends floats; issue 16).
        "delay_seconds 1.5",
        "POST",
        f"/v1/queues/{Q}/messages",
        {"messages": [{"body": 1, "delay_seconds": 1.5}]},
        "",
        400,
        10100,
    ),
    # unknown fields are refused
    (
        "1 MiB of padding in an unknown field",
        "POST",
        f"/v1/queues/{Q}/messages",
        {"messages": [{"body": 1}], "padding": "x" * MIB},
        "",
        400,
        10100,
    ),
    ("a typo: batch_sizes", "POST", f"/v1/queues/{Q}/messages/pull", {"batch_sizes": 5}, "", 400, 10100),
    (
        "unknown field in a message",
        "POST",
        f"/v1/queues/{Q}/messages",
        {"messages": [{"body": 1, "bdy": 2}]},
        "",
        400,
        10100,
    ),
    (
        "unknown field in an ack",
        "POST",
        f"/v1/queues/{Q}/messages/ack",
        {"acks": [], "ack": []},
        "",
        400,
        10100,
    ),
    (
        "Cloudflare send with an unknown field",
        "POST",
        f"{CF}/messages",
        {"body": 1, "padding": "x"},
        "",
        400,
        10100,
    ),
    # message size = body + partition key + attributes; attribute count and size limits
    (
        "attributes past max_message_bytes",
        "POST",
        f"/v1/queues/{Q}/messages",
        {"messages": [{"body": 1, "attributes": {"a": "x" * 600, "b": "y" * 600}}]},
        "",
        413,
        10107,
    ),
    (
        "partition key + body past max_message_bytes",
        "POST",
        f"/v1/queues/{Q}/messages",
        {"messages": [{"body": "x" * 900, "partition_key": "k" * 200}]},
        "",
        413,
        10107,
    ),
    (
        "20,000 attributes",
        "POST",
        f"/v1/queues/{Q}/messages",
        {"messages": [{"body": 1, "attributes": {f"k{i}": "v" for i in range(20_000)}}]},
        "",
        400,
        10100,
    ),
    (
        "5 MB attribute value",
        "POST",
        f"/v1/queues/{Q}/messages",
        {"messages": [{"body": 1, "attributes": {"a": "x" * 5_000_000}}]},
        "",
        400,
        10100,
    ),
    (
        "reserved attribute name",
        "POST",
        f"/v1/queues/{Q}/messages",
        {"messages": [{"body": 1, "attributes": {"sluice-source-queue": "x"}}]},
        "",
        400,
        10100,
    ),
    (
        "attributes not strings",
        "POST",
        f"/v1/queues/{Q}/messages",
        {"messages": [{"body": 1, "attributes": {"a": 1}}]},
        "",
        400,
        10100,
    ),
    # Cloudflare send bodies
    ("Cloudflare send of {}", "POST", f"{CF}/messages", {}, "", 400, 10100),
    (
        "Cloudflare batch with a message {}",
        "POST",
        f"{CF}/messages/batch",
        {"messages": [{}]},
        "",
        400,
        10100,
    ),
    ("native send of a message {}", "POST", f"/v1/queues/{Q}/messages", {"messages": [{}]}, "", 400, 10100),
    # Durable Streams (/streams): version range and names refused rather than normalised
    (
        "stream ?version= of 41 digits",
        "POST",
        f"/streams/{STREAM}",
        b'{"records": [3]}',
        "version=" + "9" * 41,
        400,
        None,
    ),
    (
        "stream ?version= 2^63",
        "POST",
        f"/streams/{STREAM}",
        b'{"records": [3]}',
        f"version={2**63}",
        400,
        None,
    ),
    (
        "stream ?version= with Unicode digits",
        "POST",
        f"/streams/{STREAM}",
        b'{"records": [3]}',
        "version=%D9%A3",
        400,
        None,
    ),
    (
        "stream name with a '..' segment",
        "POST",
        f"/streams/{STREAM}/../x",
        b'{"records": [3]}',
        "",
        400,
        None,
    ),
    ("stream name with a '.' segment", "POST", f"/streams/{STREAM}/./x", b'{"records": [3]}', "", 400, None),
    ("stream name with '//'", "POST", f"/streams/{STREAM}//x", b'{"records": [3]}', "", 400, None),
    ("stream name with %00", "POST", f"/streams/{STREAM}%00", b'{"records": [3]}', "", 400, None),
    ("stream name with a trailing '/'", "POST", f"/streams/{STREAM}/", b'{"records": [3]}', "", 400, None),
    ("stream name with a backslash", "POST", f"/streams/{STREAM}%5Cx", b'{"records": [3]}', "", 400, None),
    ("stream read of a '..' name", "GET", f"/streams/{STREAM}/..", None, "offset=-", 400, None),
    ("stream delete of a '.' name", "DELETE", f"/streams/./{STREAM}", None, "", 400, None),
    ("stream read past the head", "GET", f"/streams/{STREAM}", None, f"offset={past_head()}", 400, None),
    # cursors and offsets
    ("garbage list cursor", "GET", "/v1/queues", None, "cursor=%21%21garbage", 400, 10122),
    ("list cursor with a newline", "GET", "/v1/queues", None, "cursor=a%0A", 400, 10122),
    (
        "records offset past the head",
        "GET",
        f"/v1/queues/{Q}/records",
        None,
        f"offset={past_head()}",
        400,
        10122,
    ),
    (
        "records offset with Unicode digits",
        "GET",
        f"/v1/queues/{Q}/records",
        None,
        "offset=" + "0" * 31 + "%D9%A3",
        400,
        10122,
    ),
    (
        "records offset with a trailing newline",
        "GET",
        f"/v1/queues/{Q}/records",
        None,
        "offset=" + "0" * 32 + "%0A",
        400,
        10122,
    ),
    ("records cursor past the head", "GET", f"/v1/queues/{Q}/records", None, "offset=~0.1000", 400, 10122),
    ("records cursor of garbage", "GET", f"/v1/queues/{Q}/records", None, "offset=~0.1,x", 400, 10122),
]


@pytest.mark.parametrize(
    ("method", "path", "payload", "query", "status", "code"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_hostile_input_is_a_4xx_with_its_code_and_changes_nothing(
    engine, world, method, path, payload, query, status, code
):
    before = snapshot(engine, world)
    if isinstance(payload, bytes):
        got_status, body = world(method, path, raw=payload, query=query)
    else:
        got_status, body = world(method, path, payload, query=query)
    if code is None:  # Durable Streams: {"error": "..."}
        assert (got_status, sorted(body)) == (status, ["error"]), body
    else:
        assert body["success"] is False and body["errors"][0]["message"], body
        assert (got_status, body["errors"][0]["code"]) == (status, code), body
    assert snapshot(engine, world) == before


def test_an_empty_read_hands_back_the_clients_own_offset(world):
    """At the tail, or from a time in the future, next_offset never sorts before the offset sent (it
    was re-encoded with time 0, or as the current head, which a later read would start before)."""
    status, body = world("GET", f"/v1/queues/{Q}/records", query="offset=-&limit=100")
    assert status == 200 and len(body["result"]["records"]) == 3
    tail = body["result"]["next_offset"]
    future = offsets.time_prefix(4_000_000_000_000)
    for offset in (tail, future):
        status, body = world("GET", f"/v1/queues/{Q}/records", query=f"offset={offset}")
        assert status == 200, body
        assert body["result"] == {"records": [], "next_offset": offset}
    status, body = world("GET", f"/v1/queues/{Q}/records", query="start=4000000000000")
    assert body["result"] == {"records": [], "next_offset": future}


def test_a_queue_name_refused_on_create_is_refused_everywhere(world):
    """The rule is one: what create refuses, no other route accepts (and vice versa)."""
    for name in ("qa\n", "../x", "a" * 64, ""):
        status, body = world("POST", "/v1/queues", {"queue_name": name})
        assert (status, body["errors"][0]["code"]) == (400, 10102)
    from sluice.names import QUEUE, check_queue_name

    assert not QUEUE.ok("qa\n") and QUEUE.ok("a" * 63)
    assert check_queue_name(Q) == Q


@pytest.mark.parametrize("name", ["a", "a/b", "a.b/c-d_e", "..a/b..", "a b/ü/🙂", "x" * 256])
def test_ordinary_stream_names_are_accepted(name):
    from sluice.names import check_stream_name

    assert check_stream_name(name) == name


def test_the_engine_applies_the_same_rule_to_token_bindings(engine):
    """The CLI's offline token path calls the engine directly: it refuses the same names."""
    from sluice import errors

    before = engine.tokens.list()
    for name in ("../x", "a" * 1000, "qa\n"):
        with pytest.raises(errors.InvalidQueueName):
            engine.tokens.create(name, ["read"])
    assert engine.tokens.list() == before


def test_strictness_keeps_what_clients_legitimately_send(api, queue_name):
    """JSON has one number type: Cloudflare's SDK types delays as floats, so 0.0 is 0; and every
    documented field of each send body is still accepted."""
    assert api("POST", "/v1/queues", {"queue_name": queue_name})[0] == 201
    cf = f"/client/v4/accounts/acc/queues/{queue_name}"
    status, body = api(
        "POST", f"{cf}/messages", {"body": {"a": 1}, "content_type": "json", "delay_seconds": 0.0}
    )
    assert status == 200, body
    batch = {"messages": [{"body": "t", "content_type": "text", "delay_seconds": 0}], "delay_seconds": 0.0}
    assert api("POST", f"{cf}/messages/batch", batch)[0] == 200
    native = {
        "messages": [{"body": None, "partition_key": "k", "attributes": {"a": "b"}, "delay_seconds": 0}],
        "delay_seconds": 0,
    }
    assert api("POST", f"/v1/queues/{queue_name}/messages", native)[0] == 200
    status, body = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 10})
    assert status == 200 and len(body["result"]["messages"]) == 3
