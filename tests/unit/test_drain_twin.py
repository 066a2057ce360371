"""The drain scenario's Lambda executions, on the twin: every pull, ack and coordinator pass runs under
the account's concurrency quota, a refused one is sent again after its Retry-After, and the drain still
acks every message exactly once."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from bench.twin.drain import BEFORE_LANES, drain, report
from bench.twin.lambdas import ExecutionRefused
from sluice import constants as c
from sluice.engine.consume import Consumer
from sluice.models import AckResult

PULLERS, BATCH, SHARDS, BACKLOG = 20, 10, 2, 2_000


@pytest.fixture(autouse=True)
def engine_random() -> Iterator[None]:
    """`drain(engine_seed=...)` seeds the global `random` the engine draws from; other tests get theirs
    back."""
    state = random.getstate()
    yield
    random.setstate(state)


@dataclass
class Tally:
    """What the pullers' engine calls delivered and acked, by message id (the drain counts acks only)."""

    delivered: Counter[str] = field(default_factory=Counter)
    acked: Counter[str] = field(default_factory=Counter)
    partial_acks: int = 0  # ack calls that acked fewer leases than they sent
    leases: dict[str, str] = field(default_factory=dict)  # lease id -> message id


@pytest.fixture
def tally(monkeypatch: pytest.MonkeyPatch) -> Tally:
    out = Tally()
    pull, ack = Consumer.pull, Consumer.ack

    def counted_pull(self: Consumer, *args: Any, **kwargs: Any) -> Any:
        result = pull(self, *args, **kwargs)
        for m in result.messages:
            out.delivered[m.id] += 1
            out.leases[m.lease_id] = m.id
        return result

    def counted_ack(
        self: Consumer, queue_name: str, acks: Iterable[str], *args: Any, **kwargs: Any
    ) -> AckResult:
        lease_ids = list(acks)
        result = ack(self, queue_name, lease_ids, *args, **kwargs)
        if result.ack_count == len(lease_ids):
            out.acked.update(out.leases[lease] for lease in lease_ids)
        else:
            out.partial_acks += 1
        return result

    monkeypatch.setattr(Consumer, "pull", counted_pull)
    monkeypatch.setattr(Consumer, "ack", counted_ack)
    return out


def _drained_once(result: dict[str, Any], tally: Tally) -> None:
    assert result["drain_s"] is not None and result["acked"] == BACKLOG
    assert len(tally.acked) == BACKLOG and set(tally.acked.values()) == {1}  # every message, once
    assert set(tally.delivered.values()) == {1} and tally.partial_acks == 0  # no lease ran out


def test_a_quota_below_the_pullers_refuses_executions_and_every_message_is_still_acked_once(
    tally: Tally,
) -> None:
    # Four executions reserved for the consumer (an account quota of 4 would also allow only 40
    # invocations a second, 10 per unit of it, and starve the acks).
    result = drain(PULLERS, BATCH, SHARDS, BACKLOG, limit_s=30.0, engine_seed=1, reserved={c.FN_CONSUMER: 4})
    _drained_once(result, tally)
    assert result["refused_executions"]["consumer"] > 0
    assert result["failed_calls"]["ExecutionRefused"] == result["refused_executions"]["consumer"]
    assert result["failed_calls"].get("Throttled", 0) == 0  # refusals are not counted as DynamoDB's
    assert result["peak_executions"]["consumer"] <= 4
    # every pull and ack that ran is one consumer invocation: 200 batches, each a pull and an ack
    assert result["consumer_invocations"] >= 2 * BACKLOG // BATCH
    assert result["consumer_gb_s"] > 0 and result["consume_usd_per_m"] > 0


def test_a_refused_ack_is_sent_again_after_its_retry_after(
    tally: Tally, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the quota alone an ack is never refused here (it takes the slot its pull just freed), so
    the first attempt of every ack is refused by hand: the leases outlive the 1 s wait."""
    counted_ack = Consumer.ack
    refused: set[tuple[str, ...]] = set()

    def refuse_first(
        self: Consumer, queue_name: str, acks: Iterable[str], *args: Any, **kwargs: Any
    ) -> AckResult:
        lease_ids = tuple(acks)
        if lease_ids not in refused:
            refused.add(lease_ids)
            raise ExecutionRefused("refused by the test")
        return counted_ack(self, queue_name, lease_ids, *args, **kwargs)

    monkeypatch.setattr(Consumer, "ack", refuse_first)
    result = drain(PULLERS, BATCH, SHARDS, BACKLOG, limit_s=30.0, engine_seed=1)
    _drained_once(result, tally)
    assert result["failed_calls"]["ack ExecutionRefused"] == len(refused) >= BACKLOG // BATCH


def test_few_pullers_under_the_account_quota_are_never_refused(tally: Tally) -> None:
    result = drain(PULLERS, BATCH, SHARDS, BACKLOG, limit_s=30.0, engine_seed=1)
    _drained_once(result, tally)
    assert result["refused_executions"] == {}
    assert result["peak_executions"]["consumer"] <= PULLERS and result["peak_executions"]["coordinator"] == 1
    rows = report(result, BEFORE_LANES).splitlines()
    before = next(line for line in rows if line.startswith("| before lanes"))
    lanes = next(line for line in rows if line.startswith("| lanes"))
    assert "| 931 | 0 | 2.046 |" in before  # the baseline as measured on the twin with Lambda modelled
    assert f"| {result['peak_executions_total']} | 0 | {result['consume_usd_per_m']:.3f} |" in lanes
