"""API Gateway's request rate in the twin: what answers a scenario's HTTP call 429 before Lambda runs.

An HTTP API counts every request against token buckets and refuses one past any of them with 429
`{"message":"Too Many Requests"}` (no invocation: nothing billed, nothing done):
- the account's, per Region across every API: "10,000 requests per second (RPS) with an additional
  burst capacity provided by the token bucket algorithm, using a maximum bucket capacity of 5,000
  requests" ("Amazon API Gateway quotas"; adjustable on request);
- each route's: the stack's default route throttle on the `$default` stage (`api_throttle_rate` /
  `api_throttle_burst`, stacks/config.py; 1,000 / 2,000 by default; "the default route throttling
  limits can't exceed account-level rate limits", "Throttling requests to your HTTP API").

The twin's scenarios deploy with the route throttle at the account's rate and burst
(`-c api_throttle_rate=10000 -c api_throttle_burst=5000`), as an operator running many pullers would
set it: at the stack's default a thousand pullers would not get past the pull route. A route's bucket
then never binds before the account's, so the account's is the one modelled here; a scenario past it
names the raised quota it assumes (`rps`). `sluice local` enforces the route throttle as the template
sets it (sluice/local/gateway.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sluice import errors

ACCOUNT_RPS = 10_000.0  # API Gateway's throttle quota per account and Region
ACCOUNT_BURST = 5_000.0


class TooManyRequests(errors.Throttled):
    """API Gateway's 429: a client backs off and sends again (the SDK retries a 429); Lambda never ran."""


@dataclass
class TokenBucket:
    """`rate` tokens a second into a bucket of `capacity`, full at the start, refilled continuously."""

    rate: float
    capacity: float
    tokens: float = field(init=False)
    at: float = 0.0

    def __post_init__(self) -> None:
        self.tokens = self.capacity

    def available(self, now: float) -> bool:
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate)
        self.at = now
        return self.tokens >= 1.0

    def take(self, now: float) -> bool:
        if not self.available(now):
            return False
        self.tokens -= 1.0
        return True


@dataclass
class Gateway:
    """The account's request bucket. `rps`: its rate (a raised quota keeps AWS's 2:1 ratio of rate to
    burst unless `burst` is given); `scale`: a sampled scenario runs that share of the load, so it gets
    that share of the rate and the burst."""

    rps: float = ACCOUNT_RPS
    burst: float | None = None
    scale: float = 1.0
    _bucket: TokenBucket = field(init=False)

    def __post_init__(self) -> None:
        burst = self.rps / 2 if self.burst is None else self.burst
        self._bucket = TokenBucket(self.rps * self.scale, max(1.0, burst * self.scale))

    def admit(self, now: float) -> None:
        """Let one request through, or raise `TooManyRequests`."""
        if not self._bucket.take(now):
            raise TooManyRequests("API Gateway: Too Many Requests")
