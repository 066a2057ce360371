"""Events between functions: what one sends and the other parses, one model for both sides.

- `CoordinatorEvent`: the EventBridge schedule -> coordinator (the rule's target input, built from this
  model by `stacks/schedule.py`; `sluice local` reads that input back from the template); also a
  broker -> coordinator wake when shards throttle (`sluice.engine.wake`).
- `ShardWorkEvent`: coordinator -> shard function (what to do, on which queue and shards).
- `PushWorkerEvent`: coordinator -> consumer function (run one push-delivery worker slot).

Senders build the model and send `model_dump(mode="json")`; receiving handlers parse with Powertools'
parser (`event_parser` / `parse`), so a malformed event fails validation instead of doing other work.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ShardAction = Literal["flush", "compact", "retention"]


CORRELATION_KEY = "correlation_id"


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def to_payload(self) -> dict:
        return self.model_dump(mode="json", exclude_none=True)


class _Sent(_Event):
    """An event one function sends another."""

    # The sender's correlation id (`lambdas.common.invoke` adds it): the receiver logs under it, so
    # one coordinator run and the work it started share an id.
    correlation_id: str | None = Field(None, max_length=128)


class CoordinatorEvent(_Sent):
    """One scheduled coordinator run. The overrides exist for manual invocations (tests, operators);
    the schedule sends none, so the run uses the stack's cadence from the environment."""

    kind: Literal["coordinator.run"] = "coordinator.run"
    loop_seconds: float | None = Field(None, ge=0, le=900)
    period_seconds: float | None = Field(None, gt=0, le=900)
    # Set by a broker that saw its shards throttled (sluice/engine/wake.py): the queue, for the log.
    woken_by: str | None = Field(None, max_length=64)


class ShardWorkEvent(_Sent):
    """Do `actions` (in this order: flush, compact, retention) on these shards of `queue`. Flushing also
    seals the stale gaps it scans past (docs/design.md "Shard work")."""

    kind: Literal["shard.work"] = "shard.work"
    queue: str = Field(min_length=1)
    shards: list[int] = Field(min_length=1)
    actions: list[ShardAction] = Field(min_length=1)


class PushWorker(_Event):
    queue: str = Field(min_length=1)
    consumer_id: str = Field(min_length=1)
    slot: int = Field(0, ge=0)


class PushWorkerEvent(_Sent):
    """Run one push-delivery worker for a consumer's `slot` until its backlog or time runs out."""

    kind: Literal["push.worker"] = "push.worker"
    push: PushWorker
