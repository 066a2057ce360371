"""`sluice drain` acks each batch on its next pull (one request and one state write for both), writes a
batch out before that pull, and acks the last batch itself when --max stops it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice import cli
from sluice.client import Message, PullResult


class FakeClient:
    """A queue of `total` messages served `batch_size` at a time; records what each call carried."""

    def __init__(self, total: int) -> None:
        self.left = [f"m{n}" for n in range(total)]
        self.pulls: list[list[str] | None] = []
        self.acks: list[list[str]] = []
        self.outstanding: set[str] = set()

    def metrics(self, _queue: str) -> dict[str, Any]:
        return {"consumer_groups": {}, "backlog_count": len(self.left) + len(self.outstanding)}

    def pull(self, _queue: str, *, batch_size: int, acks: list[str] | None = None, **_: Any) -> PullResult:
        self.pulls.append(acks)
        self.outstanding -= set(acks or ())
        taken, self.left = self.left[:batch_size], self.left[batch_size:]
        self.outstanding |= {f"lease-{m}" for m in taken}
        messages = [Message(m, {"n": m}, "json", 0, 1, f"lease-{m}", None, {}) for m in taken]
        split = {"available": len(self.left), "in_flight": len(self.outstanding)}
        return PullResult(messages, len(self.left) + len(self.outstanding), exact=True, split=split)

    def ack(self, _queue: str, lease_ids: list[str]) -> dict[str, Any]:
        self.acks.append(list(lease_ids))
        self.outstanding -= set(lease_ids)
        return {"ackCount": len(lease_ids)}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(total: int) -> FakeClient:
        client = FakeClient(total)
        monkeypatch.setattr(cli, "_client", lambda _args: client)
        return client

    return install


def test_each_batch_is_acked_by_the_next_pull(fake: Any, tmp_path: Any) -> None:
    client = fake(25)
    out = tmp_path / "out.ndjson"
    cli.main(["drain", "q", "--batch-size", "10", "--output", str(out), "--quiet"])
    assert client.pulls == [
        None,
        [f"lease-m{n}" for n in range(10)],
        [f"lease-m{n}" for n in range(10, 20)],
        [f"lease-m{n}" for n in range(20, 25)],
    ]
    assert client.acks == [] and not client.outstanding
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [f"m{n}" for n in range(25)]


def test_max_stops_with_the_last_batch_acked_by_a_call_of_its_own(fake: Any) -> None:
    client = fake(25)
    cli.main(["drain", "q", "--batch-size", "10", "--max", "15", "--quiet"])
    assert client.pulls == [None, [f"lease-m{n}" for n in range(10)]]
    assert client.acks == [[f"lease-m{n}" for n in range(10, 15)]] and not client.outstanding
