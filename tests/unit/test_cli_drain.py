"""`sluice drain` against a stand-in client: a pull still throttled after the SDK's retries is tried
again, and the batch written before it is acked by the pull that gets through."""

from __future__ import annotations

from typing import Any

from sluice import cli
from sluice.client import Message, PullResult, SluiceApiError


class BusyClient:
    """Answers one message, then two throttles the SDK gave up on, then an exact empty answer."""

    def __init__(self) -> None:
        self.pulls: list[list[str] | None] = []
        self.answers: list[Any] = [
            PullResult([Message.from_json({"id": "m1", "body": "x", "lease_id": "l1"})], 1, None, True, None),
            SluiceApiError(429, None, "Too Many Requests"),
            SluiceApiError(503, None, "Service Unavailable"),
            PullResult([], 0, None, True, {"available": 0, "in_flight": 0, "delayed": 0}),
        ]

    def metrics(self, queue: str) -> dict[str, Any]:
        return {"consumer_groups": {}, "backlog_count": 0}

    def pull(self, queue: str, *, acks: list[str] | None = None, **_: Any) -> PullResult:
        self.pulls.append(acks)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def ack(self, queue: str, leases: list[str]) -> None:
        raise AssertionError("the last batch rides on the pull that proves the queue drained")


def test_drain_pulls_again_through_throttles_and_acks_on_the_pull_that_gets_through(monkeypatch, capsys):
    client = BusyClient()
    monkeypatch.setattr(cli, "_client", lambda _args: client)
    monkeypatch.setattr(cli.time, "sleep", lambda _s: None)
    cli.main(["drain", "orders", "--quiet", "--json"])
    assert client.pulls == [None, ["l1"], ["l1"], ["l1"]]
    assert '"drained":1' in capsys.readouterr().out
