"""Lambda executions in the twin: the account's concurrency quota, and what the executions cost.

Every HTTP call of a scenario is one execution of a function (a pull or an ack runs the consumer, a send
the broker) for as long as the call takes in virtual time; a long-poll holds its execution for its whole
wait. Lambda: "your account has a default concurrency limit of 1,000 concurrent executions across all
functions in an AWS Region" (a quota AWS raises on request); an invocation past it is throttled
(`TooManyRequestsException`), which API Gateway answers with a 500 of its own that the SDK sends again
after a backoff when the request is safe to repeat (`sluice/client.py` `_retryable`). Here that
invocation raises `ExecutionRefused`, a `Throttled` (the scenarios' clients back off and retry, as after
a 429).
Reserved concurrency (the stack's `<function>_reserved_concurrency`): a function with a reservation runs
at most that many at once, and the others share what the reservations leave of the quota.
Handler CPU: a call holds its execution, after its AWS calls, for the CPU its handler spends, as
measured on one core of this machine (docs/performance.md "Handler CPU per message", random text of
200 B as the scenarios send, fitted as a call's base and each message's share) and stretched by
Lambda's CPU allocation: "at 1,769 MB, a function has the equivalent of one vCPU", and less in
proportion below it (`handler_cpu_s`, at the function's memory: the stack's default unless a scenario
gives it its own, as `-c consumer_memory_mb` does). So a pull of 100 at 1,024 MB answers ~12 ms after
its commit, and ~50 ms at 256 MB.
Billed duration: the call's virtual time rounded up to 1 ms, as GB-s at the function's memory
(`bench.prices.billed_gb_seconds`). Prices: `bench.prices.on_demand_per_million`.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from bench.prices import LAMBDA_MEMORY_MB, Usage, billed_gb_seconds, on_demand_per_million
from bench.twin.dynamo import Stats
from sluice import constants as c
from sluice import errors

ACCOUNT_CONCURRENCY = 1_000  # Lambda's default per account and Region
ONE_VCPU_MB = 1_769  # Lambda's memory at which a function has one vCPU's worth of CPU
# Handler CPU at one vCPU, in ms: (per call, per message handled), fitted to the "Handler CPU per
# message" rows of random text 200 B with acks by request (batches of 1, 10 and 100).
Operation = Literal["send", "pull", "ack"]
HANDLER_CPU_MS: dict[Operation, tuple[float, float]] = {
    "send": (1.26, 0.031),
    "pull": (2.1, 0.047),
    "ack": (1.5, 0.015),
}
FUNCTION_OF: dict[Operation, str] = {"send": c.FN_BROKER, "pull": c.FN_CONSUMER, "ack": c.FN_CONSUMER}


def handler_cpu_s(
    operation: Operation, messages: int, acks: int = 0, memory_mb: int = LAMBDA_MEMORY_MB
) -> float:
    """Seconds of handler CPU for one call handling `messages` (`acks`: acks carried on a pull), at
    `memory_mb` (the stack's default unless the function has its own)."""
    base, each = HANDLER_CPU_MS[operation]
    ms = base + each * messages + HANDLER_CPU_MS["ack"][1] * acks
    return ms / 1000 * max(1.0, ONE_VCPU_MB / memory_mb)


class ExecutionRefused(errors.Throttled):
    """An invocation past the quota: a client handles it as any throttle (Retry-After 1 s), and a
    scenario can still count it apart from the calls DynamoDB throttled."""


@dataclass
class Executions:
    """Executions in flight by function; within `window` (virtual seconds), their peak, the invocations
    that ended in it and their billed GB-s (at the function's memory: `memory_mb`, else the stack's
    default), and the invocations refused past the quota or past the function's reservation."""

    clock: Callable[[], float]
    sleep: Callable[[float], None]  # the scenario's virtual sleep: a call's handler CPU holds its execution
    window: tuple[float, float] = (0.0, math.inf)
    quota: int = ACCOUNT_CONCURRENCY
    reserved: Mapping[str, int] = field(default_factory=dict)
    memory_mb: Mapping[str, int] = field(default_factory=dict)  # function -> MB, where not the default
    running: Counter[str] = field(default_factory=Counter)
    peak: Counter[str] = field(default_factory=Counter)
    peak_total: int = 0
    invocations: Counter[str] = field(default_factory=Counter)
    gb_seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    refused: Counter[str] = field(default_factory=Counter)

    def _counting(self) -> bool:
        return self.window[0] <= self.clock() < self.window[1]

    def _full(self, function: str) -> bool:
        if function in self.reserved:
            return self.running[function] >= self.reserved[function]
        unreserved = self.quota - sum(self.reserved.values())
        return sum(n for f, n in self.running.items() if f not in self.reserved) >= unreserved

    def memory(self, function: str) -> int:
        return self.memory_mb.get(function, LAMBDA_MEMORY_MB)

    def compute(self, operation: Operation, messages: int, acks: int = 0) -> None:
        """Inside `run`: the handler's CPU for what the call handled, at its function's memory."""
        self.sleep(handler_cpu_s(operation, messages, acks, self.memory(FUNCTION_OF[operation])))

    @contextlib.contextmanager
    def run(self, function: str) -> Iterator[None]:
        if self._full(function):
            self.refused[function] += self._counting()
            raise ExecutionRefused(f"Lambda: no concurrent execution left for {function}")
        self.running[function] += 1
        if self._counting():
            self.peak[function] = max(self.peak[function], self.running[function])
            self.peak_total = max(self.peak_total, sum(self.running.values()))
        started = self.clock()
        try:
            yield
        finally:
            self.running[function] -= 1
            if self._counting():
                self.invocations[function] += 1
                billed_ms = (self.clock() - started) * 1000
                self.gb_seconds[function] += billed_gb_seconds(billed_ms, 0, memory_mb=self.memory(function))


def consume_usd_per_million(lambdas: Executions, stats: Stats, acked: int) -> float:
    """What consuming cost per million messages acked, at on-demand prices: the pullers' capacity units
    (`stats` by role), the consumer function's invocations, each one HTTP API request (a pull of 100
    small messages is far under the 512 KB meter), and their billed duration. One formula for every
    scenario that prices its pullers."""
    per = max(1, acked)
    calls = lambdas.invocations[c.FN_CONSUMER] / per
    used = Usage(
        wru=stats.wcu_by["puller"] / per,
        rru=stats.rcu_by["puller"] / per,
        apigw_requests=calls,
        invocations=calls,
        gb_seconds=lambdas.gb_seconds[c.FN_CONSUMER] / per,
    )
    return on_demand_per_million(used)["total"]
