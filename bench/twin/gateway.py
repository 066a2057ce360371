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

from collections.abc import Callable
from dataclasses import dataclass, field

from sluice import errors
from sluice.local.gateway import TokenBucket
from sluice.local.template import ACCOUNT_THROTTLE, ThrottleLimits


class TooManyRequests(errors.Throttled):
    """API Gateway's 429: a client backs off and sends again (the SDK retries a 429); Lambda never ran."""


@dataclass
class Gateway:
    """The account's request bucket (`sluice local`'s, on the scenario's virtual clock). `rps`: its
    rate (a raised quota keeps AWS's 2:1 ratio of rate to burst unless `burst` is given); `scale`: a
    sampled scenario runs that share of the load, so it gets that share of the rate and the burst."""

    clock: Callable[[], float]
    rps: float = ACCOUNT_THROTTLE.rate
    burst: float | None = None
    scale: float = 1.0
    _bucket: TokenBucket = field(init=False)

    def __post_init__(self) -> None:
        burst = self.rps / 2 if self.burst is None else self.burst
        limits = ThrottleLimits(self.rps * self.scale, max(1, round(burst * self.scale)))
        self._bucket = TokenBucket(limits, self.clock)

    def admit(self) -> None:
        """Let one request through, or raise `TooManyRequests`."""
        if not self._bucket.take():
            raise TooManyRequests("API Gateway: Too Many Requests")
