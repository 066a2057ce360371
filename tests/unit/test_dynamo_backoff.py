"""Unprocessed keys of BatchGetItem / BatchWriteItem are retried after growing, jittered, capped pauses,
and a table that keeps leaving them unprocessed ends in `Throttled` instead of a hot loop."""

from __future__ import annotations

from typing import Any

import pytest

from sluice import errors
from sluice.adapters import dynamo


class FakeClient:
    """Leaves every key unprocessed `stubborn` times, then answers."""

    def __init__(self, stubborn: int) -> None:
        self.stubborn = stubborn
        self.calls = 0

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.stubborn:
            return {"Responses": {}, "UnprocessedKeys": RequestItems}
        keys = RequestItems["t"]["Keys"]
        return {"Responses": {"t": [{**k, "v": {"N": "1"}} for k in keys]}}

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls += 1
        return {"UnprocessedItems": RequestItems if self.calls <= self.stubborn else {}}


class FakeTable(dynamo.Table):
    def __init__(self, client: FakeClient) -> None:
        super().__init__("t")
        self.fake = client

    @property
    def _client(self) -> Any:
        return self.fake

    @property
    def _fail_fast_client(self) -> Any:
        return self.fake


@pytest.fixture
def pauses(monkeypatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(dynamo.time, "sleep", slept.append)
    return slept


def test_unprocessed_keys_are_retried_after_backoff_pauses(pauses):
    client = FakeClient(stubborn=3)
    found = dynamo.batch_get_across({FakeTable(client): [("a", "1"), ("b", "2")]})
    assert sorted(found) == [("t", "a", "1"), ("t", "b", "2")]
    assert client.calls == 4 and len(pauses) == 3  # no pause before the first call
    assert all(0 <= p <= dynamo.UNPROCESSED_CAP_S for p in pauses)


def test_pauses_grow_exponentially_with_full_jitter_and_a_cap():
    top = [dynamo.unprocessed_pause(r, rand=lambda: 1.0) for r in range(1, 10)]
    assert top[:3] == [
        dynamo.UNPROCESSED_BASE_S,
        2 * dynamo.UNPROCESSED_BASE_S,
        4 * dynamo.UNPROCESSED_BASE_S,
    ]
    assert max(top) == dynamo.UNPROCESSED_CAP_S and top == sorted(top)
    assert dynamo.unprocessed_pause(5, rand=lambda: 0.0) == 0.0  # jitter spans the whole interval


def test_a_table_that_never_processes_ends_in_throttled(pauses):
    client = FakeClient(stubborn=10**6)
    with pytest.raises(errors.Throttled):
        dynamo.batch_delete(FakeTable(client), [("a", "1")])
    assert client.calls == dynamo.UNPROCESSED_ROUNDS and len(pauses) == dynamo.UNPROCESSED_ROUNDS - 1


def test_a_partial_reader_gets_what_was_read_and_the_keys_left_throttled(pauses):
    client = FakeClient(stubborn=10**6)
    found, unread = dynamo.batch_get_available({FakeTable(client): [("a", "1"), ("b", "2")]})
    assert found == {} and unread == {("t", "a", "1"), ("t", "b", "2")}
    assert client.calls == dynamo.UNPROCESSED_ROUNDS
    found, unread = dynamo.batch_get_available({FakeTable(FakeClient(stubborn=2)): [("a", "1")]})
    assert list(found) == [("t", "a", "1")] and unread == set()


def test_a_fail_fast_read_asks_once(pauses):
    """A pull holding leases answers them rather than wait out a throttled partition's retries."""
    client = FakeClient(stubborn=1)
    found, unread = dynamo.batch_get_available({FakeTable(client): [("a", "1")]}, fail_fast=True)
    assert found == {} and unread == {("t", "a", "1")} and client.calls == 1 and pauses == []
    with pytest.raises(errors.Throttled):
        dynamo.batch_get_across({FakeTable(FakeClient(stubborn=1)): [("a", "1")]}, fail_fast=True)
