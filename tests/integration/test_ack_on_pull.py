"""Acks carried on the next pull (native `/v1` pull's optional `acks`), through the consumer handler:
one group-state write for the acks and the pull, the ack endpoint's answers, nothing applied when the
request is refused."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from sluice.engine import keys


@pytest.fixture
def queue(api, queue_name) -> str:
    status, body = api("POST", "/v1/queues", {"queue_name": queue_name})
    assert status == 201, body
    return queue_name


def _send(api, queue: str, n: int) -> None:
    status, body = api("POST", f"/v1/queues/{queue}/messages", {"messages": [{"body": i} for i in range(n)]})
    assert status == 200, body


def _pull(api, queue: str, **body: Any) -> tuple[int, Any]:
    return api("POST", f"/v1/queues/{queue}/messages/pull", body)


def _leases(body: Any) -> list[dict[str, str]]:
    return [{"lease_id": m["lease_id"]} for m in body["result"]["messages"]]


@contextmanager
def _group_state_writes() -> Iterator[list[str]]:
    """The sort keys of the group-state items written (PutItem) while the block runs."""
    from sluice.adapters import aws

    seen: list[str] = []
    attached: list[Any] = []

    def on_call(params: dict[str, Any], model: Any, **_: Any) -> None:
        sk = (params.get("Item") or params.get("Key") or {}).get("sk", {}).get("S", "")
        if model.name in ("PutItem", "UpdateItem") and sk.startswith(keys.GROUP_STATE_SK_PREFIX):
            seen.append(sk)

    def attach(client: Any) -> None:
        if client.meta.service_model.service_name == "dynamodb":
            for op in ("PutItem", "UpdateItem"):
                client.meta.events.register(
                    f"before-parameter-build.dynamodb.{op}", on_call, unique_id=f"ack-on-pull-{op}"
                )
            attached.append(client)

    stop = aws.instrument(attach)
    try:
        yield seen
    finally:
        stop()
        for client in attached:
            for op in ("PutItem", "UpdateItem"):
                client.meta.events.unregister(
                    f"before-parameter-build.dynamodb.{op}", unique_id=f"ack-on-pull-{op}"
                )


def test_acks_ride_on_the_next_pull_in_one_state_write(api, queue):
    _send(api, queue, 4)
    _, first = _pull(api, queue, batch_size=2)
    with _group_state_writes() as writes:
        status, second = _pull(api, queue, batch_size=2, acks=_leases(first))
    assert status == 200, second
    assert second["result"]["ack"] == {"ackCount": 2, "retryCount": 0, "warnings": []}
    assert [m["body"] for m in second["result"]["messages"]] == [2, 3]
    assert writes == [keys.group_state_sk("default")]  # one write: the acks and the new leases together
    # The last batch's acks on an empty pull: everything done, nothing left in flight.
    status, last = _pull(api, queue, batch_size=2, acks=_leases(second))
    assert status == 200 and last["result"]["ack"]["ackCount"] == 2
    assert last["result"]["messages"] == [] and last["result"]["message_backlog_count"] == 0


def test_a_long_poll_applies_its_acks_at_once_and_reports_them_when_it_answers(api, queue):
    _send(api, queue, 1)
    _, first = _pull(api, queue, batch_size=1)
    status, body = _pull(api, queue, batch_size=1, wait_time_ms=300, acks=_leases(first))
    assert status == 200 and body["result"]["messages"] == []
    assert body["result"]["ack"] == {"ackCount": 1, "retryCount": 0, "warnings": []}


def test_a_pull_without_acks_answers_as_before(api, queue):
    _send(api, queue, 1)
    status, body = _pull(api, queue, batch_size=1)
    assert status == 200 and "ack" not in body["result"]


def test_bad_leases_get_the_ack_endpoints_answers(api, queue):
    _send(api, queue, 2)
    _, first = _pull(api, queue, batch_size=1)
    lease = _leases(first)[0]
    bogus = {"lease_id": "not-a-lease"}
    status, carried = _pull(api, queue, batch_size=1, acks=[bogus, lease])
    assert status == 200
    assert carried["result"]["ack"]["ackCount"] == 1
    # Acked already (by the pull above) and never valid: the same warnings from both routes.
    _, on_pull = _pull(api, queue, batch_size=1, acks=[bogus, lease])
    _, on_ack = api("POST", f"/v1/queues/{queue}/messages/ack", {"acks": [bogus, lease]})
    assert on_pull["result"]["ack"] == on_ack["result"]
    assert on_ack["result"]["ackCount"] == 0 and len(on_ack["result"]["warnings"]) == 2
    assert "not a valid lease" in on_ack["result"]["warnings"][0]
    assert "already acked or gone" in on_ack["result"]["warnings"][1]


def test_another_groups_lease_is_acked_too(api, queue):
    status, _ = api("POST", f"/v1/queues/{queue}/consumer-groups", {"name": "audit", "start": "earliest"})
    assert status == 201
    _send(api, queue, 1)
    _, audit = _pull(api, queue, batch_size=1, consumer_group="audit")
    status, body = _pull(api, queue, batch_size=1, acks=_leases(audit))
    assert status == 200 and body["result"]["ack"] == {"ackCount": 1, "retryCount": 0, "warnings": []}
    _, after = _pull(api, queue, batch_size=1, consumer_group="audit")
    assert after["result"]["messages"] == [] and after["result"]["message_backlog_count"] == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"batch_size": 0},  # out of range: the whole request is refused, acks included
        {"acks": "x"},
        {"acks": [{"lease": "x"}]},  # unknown field in an ack
        {"acks": [{"lease_id": ""}]},
        {"acks": [{"lease_id": "x"}] * 1001},
    ],
)
def test_a_refused_pull_applies_no_ack_and_leases_nothing(api, queue, bad):
    _send(api, queue, 2)
    _, first = _pull(api, queue, batch_size=1)
    request = {"batch_size": 1, "acks": _leases(first), **bad}
    status, body = _pull(api, queue, **request)
    assert status == 400 and body["errors"][0]["code"] == 10100, body
    # Nothing changed: the second message is still there to lease, the first still awaits its ack.
    _, next_pull = _pull(api, queue, batch_size=5)
    assert [m["body"] for m in next_pull["result"]["messages"]] == [1]
    _, acked = api("POST", f"/v1/queues/{queue}/messages/ack", {"acks": _leases(first)})
    assert acked["result"]["ackCount"] == 1


def test_a_pull_refused_by_the_engine_applies_no_ack(api, queue):
    _send(api, queue, 1)
    _, first = _pull(api, queue, batch_size=1)
    status, body = _pull(api, queue, batch_size=1, consumer_group="nobody", acks=_leases(first))
    assert status == 404, body
    _, acked = api("POST", f"/v1/queues/{queue}/messages/ack", {"acks": _leases(first)})
    assert acked["result"]["ackCount"] == 1  # still pending: the refused pull applied nothing
