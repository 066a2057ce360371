"""The Cloudflare face's administration routes and edge rules through the real handlers: queue ids,
settings mapping, consumers mapped onto queue settings and push consumers, purge, the envelope on
unknown paths, empty bodies, fractional delays and the two SDK generations' ack `warnings`."""

from __future__ import annotations

from unittest.mock import ANY

import pytest

ACCOUNT = "023e105f4ecef8ad9ca31a8372d0c353"
CF = f"/client/v4/accounts/{ACCOUNT}/queues"


@pytest.fixture
def cfq(api, queue_name) -> dict:
    status, body = api("POST", CF, {"queue_name": queue_name})
    assert status == 200, body
    return body["result"]


def _token(api, queue: str, *scopes: str) -> str:
    return api("POST", "/v1/tokens", {"queue": queue, "scopes": list(scopes)})[1]["result"]["token"]


def test_queue_id_is_stable_32_hex_and_addresses_the_queue(api, cfq):
    qid, name = cfq["queue_id"], cfq["queue_name"]
    assert len(qid) == 32 and int(qid, 16) >= 0
    assert api("GET", f"/v1/queues/{name}")[1]["result"]["queue_id"] == qid  # the native face agrees
    for ref in (qid, name):
        status, body = api("GET", f"{CF}/{ref}")
        assert status == 200 and body["result"]["queue_id"] == qid
    # A token bound to the queue's name works with its id; one bound to another queue does not.
    token = _token(api, name, "read", "write")
    assert api("POST", f"{CF}/{qid}/messages", {"body": 1}, token=token)[0] == 200
    other = _token(api, "someone-else", "read", "write")
    assert api("POST", f"{CF}/{qid}/messages", {"body": 1}, token=other)[0] == 403
    # Deleted and created again: a new id; the old one is gone.
    assert api("DELETE", f"{CF}/{qid}")[0] == 200
    again = api("POST", CF, {"queue_name": name})[1]["result"]
    assert again["queue_id"] != qid
    status, body = api("GET", f"{CF}/{qid}")
    assert status == 404 and body["errors"][0]["code"] == 10104


def test_put_replaces_settings_patch_changes_only_those_given(api, cfq):
    qid = cfq["queue_id"]
    settings = {"delivery_delay": 2.5, "message_retention_period": 3600, "delivery_paused": True}
    status, body = api("PATCH", f"{CF}/{qid}", {"settings": settings})
    assert status == 200
    assert body["result"]["settings"] == {
        "delivery_delay": 3,  # rounded up: never delivered before the delay asked for
        "delivery_paused": True,
        "message_retention_period": 3600,
    }
    assert api("GET", f"/v1/queues/{cfq['queue_name']}")[1]["result"]["paused"] is True
    status, body = api("PUT", f"{CF}/{qid}", {"settings": {"delivery_delay": 1}})
    assert body["result"]["settings"] == {
        "delivery_delay": 1,
        "delivery_paused": False,
        "message_retention_period": 345600,
    }
    status, body = api("PATCH", f"{CF}/{qid}", {"queue_name": "renamed"})
    assert status == 400 and body["errors"][0]["code"] == 10100
    status, body = api("PATCH", f"{CF}/{qid}", {"settings": {"message_retention_period": 5}})
    assert status == 400 and not body["success"]
    assert api("GET", f"{CF}/{qid}")[1]["result"]["settings"]["delivery_delay"] == 1  # unchanged


def test_http_pull_consumer_sets_the_queue_settings_and_the_pull_batch(api, cfq):
    qid, name = cfq["queue_id"], cfq["queue_name"]
    consumer = {
        "type": "http_pull",
        "dead_letter_queue": f"{name}-dlq",
        "settings": {"batch_size": 3, "max_retries": 6, "retry_delay": 0.2, "visibility_timeout_ms": 9000},
    }
    status, body = api("POST", f"{CF}/{qid}/consumers", consumer)
    assert status == 200, body
    settings = api("GET", f"/v1/queues/{name}")[1]["result"]["settings"]
    assert (settings["max_retries"], settings["retry_delay_seconds"]) == (6, 1)
    assert (settings["visibility_timeout_ms"], settings["dead_letter_queue"]) == (9000, f"{name}-dlq")
    assert api("POST", f"{CF}/{qid}/consumers", consumer)[0] == 409  # one http_pull per queue
    api("POST", f"{CF}/{qid}/messages/batch", {"messages": [{"body": i} for i in range(5)]})
    status, body = api("POST", f"{CF}/{qid}/messages/pull", raw=b"")  # no body: the consumer's batch
    assert status == 200 and len(body["result"]["messages"]) == 3
    cid = body and api("GET", f"{CF}/{qid}/consumers")[1]["result"][0]["consumer_id"]
    assert api("DELETE", f"{CF}/{qid}/consumers/{cid}")[0] == 200
    assert api("GET", f"{CF}/{qid}/consumers/{cid}")[0] == 404


def test_worker_consumer_is_a_push_consumer(api, cfq):
    qid, name = cfq["queue_id"], cfq["queue_name"]
    status, body = api(
        "POST",
        f"{CF}/{qid}/consumers",
        {"type": "worker", "script_name": "https://example.com/q", "settings": {"batch_size": 25}},
    )
    assert status == 200, body
    cid = body["result"]["consumer_id"]
    (push,) = api("GET", f"/v1/queues/{name}/consumers")[1]["result"]["consumers"]
    assert (push["id"], push["type"], push["url"], push["max_batch_size"]) == (
        cid,
        "webhook",
        "https://example.com/q",
        25,
    )
    status, body = api("POST", f"{CF}/{qid}/consumers", {"type": "worker", "script_name": "my-worker"})
    assert status == 400 and body["errors"][0]["code"] == 10124  # a Worker name names no target here


def test_purge_needs_confirmation_and_reports_status(api, cfq):
    qid = cfq["queue_id"]
    assert api("GET", f"{CF}/{qid}/purge")[1]["result"] == {"started_at": None, "completed": None}
    api("POST", f"{CF}/{qid}/messages", {"body": "x"})
    status, body = api("POST", f"{CF}/{qid}/purge", {})
    assert status == 400 and body["errors"][0]["code"] == 10100
    assert api("GET", f"{CF}/{qid}/metrics")[1]["result"]["backlog_count"] == 1  # nothing changed
    assert api("POST", f"{CF}/{qid}/purge", {"delete_messages_permanently": True})[0] == 200
    status = api("GET", f"{CF}/{qid}/purge")[1]["result"]
    assert status["completed"] == "true" and status["started_at"].endswith("Z")
    assert api("GET", f"{CF}/{qid}/metrics")[1]["result"] == {
        "backlog_count": 0,
        "backlog_bytes": 0,
        "oldest_message_timestamp_ms": 0,
    }


def test_unknown_paths_and_methods_answer_the_envelope(api, cfq):
    qid = cfq["queue_id"]
    status, body = api("GET", f"{CF}/{qid}/messages/pull")
    assert status == 405 and body["errors"][0]["code"] == 10120 and body["success"] is False
    status, body = api("GET", f"{CF}/{qid}/nothing-here")
    assert status == 404 and body["errors"][0]["code"] == 10114 and body["result"] is None
    status, body = api("GET", "/client/v4/zones")
    assert status == 404 and body["errors"][0]["code"] == 10114


def test_empty_bodies_mean_defaults_and_delays_take_fractions(api, cfq):
    qid = cfq["queue_id"]
    status, body = api("POST", f"{CF}/{qid}/messages", {})
    assert status == 400 and body["errors"][0]["code"] == 10100  # a message needs a body
    assert (
        api("POST", f"{CF}/{qid}/messages", {"body": "later", "content_type": "text", "delay_seconds": 1.5})[
            0
        ]
        == 200
    )
    assert api("POST", f"{CF}/{qid}/messages", {"body": "now", "content_type": "text"})[0] == 200
    status, body = api("POST", f"{CF}/{qid}/messages/pull", raw=b"")
    assert status == 200 and [m["body"] for m in body["result"]["messages"]] == ["now"]
    status, body = api("POST", f"{CF}/{qid}/messages/ack", raw=b"")
    assert status == 200 and body["result"]["ackCount"] == 0


def test_ack_warnings_shape_follows_the_sdk_generation(api, cfq):
    qid = cfq["queue_id"]
    api("POST", f"{CF}/{qid}/messages", {"body": 1})
    lease = api("POST", f"{CF}/{qid}/messages/pull", {})[1]["result"]["messages"][0]["lease_id"]
    ack = {"acks": [{"lease_id": lease}, {"lease_id": "made-up"}]}
    body = api("POST", f"{CF}/{qid}/messages/ack", ack)[1]
    assert body["result"]["ackCount"] == 1 and set(body["result"]["warnings"]) == {"made-up"}
    again = {"acks": [{"lease_id": lease}]}  # already acked: the warning names the message

    def warnings_for(lang: str | None, version: str | None) -> object:
        sdk = {"X-Stainless-Lang": lang, "X-Stainless-Package-Version": version}
        headers = {k: v for k, v in sdk.items() if v is not None}
        return api("POST", f"{CF}/{qid}/messages/ack", again, headers=headers)[1]["result"]["warnings"]

    # Each SDK numbers its own releases: PyPI 4.x and npm 4.x/5.x model a list, PyPI 5.x and npm 6.x+ a map.
    for lang, version in [("python", "4.3.1"), ("js", "4.5.0"), ("js", "5.2.0")]:
        listed = warnings_for(lang, version)
        assert isinstance(listed, list) and len(listed) == 1, (lang, version)
    for lang, version in [
        ("python", "5.9.0"),
        ("js", "6.0.0"),
        ("js", "7.3.0"),
        ("go", "4.0.0"),
        (None, None),
    ]:
        assert warnings_for(lang, version) == {lease: ANY}, (lang, version)
    assert warnings_for(None, "4.3.1") == {lease: ANY}  # a version without its language: the current API


def test_peek_reads_without_leasing_and_purge_removes_delivered_messages(api, cfq):
    qid = cfq["queue_id"]
    batch = {"messages": [{"body": f"m{i}", "content_type": "text"} for i in range(3)]}
    api("POST", f"{CF}/{qid}/messages/batch", batch)
    (leased,) = api("POST", f"{CF}/{qid}/messages/pull", {"batch_size": 1})[1]["result"]["messages"]
    peeked = api("POST", f"{CF}/{qid}/messages/peek", {"batch_size": 10})[1]["result"]["messages"]
    assert [(m["body"], m["attempts"]) for m in peeked] == [("m0", 1), ("m1", 0), ("m2", 0)]
    assert peeked[0]["id"] == leased["id"]
    again = api("POST", f"{CF}/{qid}/messages/peek", raw=b"")[1]["result"]["messages"]
    assert [m["attempts"] for m in again] == [1, 0, 0]  # peeking delivers nothing
    refs = {"refs": [{"ref": peeked[0]["ref"]}, {"ref": peeked[1]["ref"]}, {"ref": "made-up"}]}
    status, body = api("POST", f"{CF}/{qid}/messages/purge", refs)
    assert status == 200 and body["result"]["errors"] == []
    assert set(body["result"]["warnings"]) == {peeked[1]["ref"], "made-up"}
    assert "never delivered" in body["result"]["warnings"][peeked[1]["ref"]]
    left = api("POST", f"{CF}/{qid}/messages/peek", {})[1]["result"]["messages"]
    assert [m["body"] for m in left] == ["m1", "m2"]
    assert api("GET", f"{CF}/{qid}/metrics")[1]["result"]["backlog_count"] == 2
    status, body = api("POST", f"{CF}/{qid}/messages/purge", {"refs": []})
    assert status == 400 and body["errors"][0]["code"] == 10100
