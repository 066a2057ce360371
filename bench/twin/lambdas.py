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
Two rates bound the invocations besides (Lambda developer guide, "Lambda function scaling" and
"Understanding Lambda function scaling"): across all functions, "a requests per second limit equal to
10 times your account concurrency" (10,000 a second at the default quota), and for each function a
scaling rate of "1,000 execution environment instances every 10 seconds", refilled continuously: a
call that needs one environment more than the function has had is refused while that bucket is empty.
Both refusals are `ExecutionRefused`, as past the quota. A call through the HTTP API (`run`'s
`via_api`) first passes API Gateway's throttles (`bench.twin.gateway`): past them it is answered 429
and Lambda never runs.
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
from bench.twin.gateway import Gateway, TooManyRequests
from sluice import constants as c
from sluice import errors
from sluice.local.gateway import TokenBucket
from sluice.local.template import ThrottleLimits

ACCOUNT_CONCURRENCY = 1_000  # Lambda's default per account and Region
REQUESTS_PER_EXECUTION = 10  # the account's invocations a second: 10 x its concurrency quota
NEW_ENVIRONMENTS = 1_000  # a function's scaling rate: this many new environments ...
NEW_ENVIRONMENTS_S = 10.0  # ... every this many seconds
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
    default), the invocations Lambda refused (past the quota, the function's reservation, the account's
    requests a second or the function's scaling rate) and the requests API Gateway refused. `scale`: a
    sampled scenario runs that share of the load, against that share of every quota (`quota` is given
    scaled; the rates and the gateway's buckets are scaled here)."""

    clock: Callable[[], float]
    sleep: Callable[[float], None]  # the scenario's virtual sleep: a call's handler CPU holds its execution
    window: tuple[float, float] = (0.0, math.inf)
    quota: int = ACCOUNT_CONCURRENCY
    reserved: Mapping[str, int] = field(default_factory=dict)
    memory_mb: Mapping[str, int] = field(default_factory=dict)  # function -> MB, where not the default
    scale: float = 1.0
    gateway: Gateway | None = None  # None: API Gateway at the account's default quota
    running: Counter[str] = field(default_factory=Counter)
    peak: Counter[str] = field(default_factory=Counter)
    peak_total: int = 0
    invocations: Counter[str] = field(default_factory=Counter)
    gb_seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    refused: Counter[str] = field(default_factory=Counter)
    refused_by_gateway: Counter[str] = field(default_factory=Counter)
    environments: Counter[str] = field(default_factory=Counter)  # the most a function has had at once
    _requests: TokenBucket = field(init=False)
    _scaling: dict[str, TokenBucket] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        rate = REQUESTS_PER_EXECUTION * self.quota  # `quota` is already scaled
        self._requests = TokenBucket(ThrottleLimits(rate, max(1, round(rate))), self.clock)
        if self.gateway is None:
            self.gateway = Gateway(self.clock, scale=self.scale)

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

    def _new_environment(self, function: str) -> bool:
        """Whether the function may have one more environment than ever before (its scaling rate)."""
        if self.running[function] < self.environments[function]:
            return True
        bucket = self._scaling.get(function)
        if bucket is None:
            capacity = max(1, round(NEW_ENVIRONMENTS * self.scale))
            limits = ThrottleLimits(capacity / NEW_ENVIRONMENTS_S, capacity)
            bucket = self._scaling[function] = TokenBucket(limits, self.clock)
        if not bucket.take():
            return False
        self.environments[function] += 1
        return True

    @contextlib.contextmanager
    def run(self, function: str, *, via_api: bool = True) -> Iterator[None]:
        """One invocation of `function`, for as long as the block runs; `via_api`: a request through
        the HTTP API (an asynchronous invocation, as the coordinator's, is not)."""
        if via_api and self.gateway is not None:
            try:
                self.gateway.admit()
            except TooManyRequests:
                self.refused_by_gateway[function] += self._counting()
                raise
        if self._full(function):
            self.refused[function] += self._counting()
            raise ExecutionRefused(f"Lambda: no concurrent execution left for {function}")
        if not self._requests.take():
            self.refused[function] += self._counting()
            raise ExecutionRefused("Lambda: the account's requests a second are all taken")
        if not self._new_environment(function):
            self.refused[function] += self._counting()
            raise ExecutionRefused(f"Lambda: {function} scales no faster than its scaling rate")
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
