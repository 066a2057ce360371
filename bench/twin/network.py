"""The twin's network between regions: what a call pays on top of the service's own latency when the
caller (an actor's `region`) and the resource (a twin table's or mirror's `region`) are in different
AWS regions, and what a producer pays to reach a regional HTTP API.

Model (each figure from where it is cited; none of it is measured here):
- Inter-region round trip: a fixed base per region pair, times log-normal jitter. Bases are the
  average EC2-to-EC2 ping RTTs of the table "Latency Between AWS Global Regions" reproduced in
  acomputerscientistlearnsaws.blogspot.com/2017/04/aws-regions.html: us-east-1 ↔ eu-west-1 80.5 ms,
  us-east-1 ↔ ap-southeast-1 216.7 ms, eu-west-1 ↔ ap-southeast-1 238.1 ms. They are 2017 figures
  and on the high side of today's: AWS's own Infrastructure Performance (round-trip latency between
  AWS-managed probes, the p50 of each 5-minute interval, docs.aws.amazon.com/network-manager/latest/
  infrastructure-performance/how-nmip-works.html) shows us-east-1 → us-west-2 at 62.4 ms in its CLI
  example, where the 2017 table has 87.0 ms. Keeping the older, larger figures is the conservative
  choice for "what does far cost".
- Jitter: no distribution is published (Infrastructure Performance reports p50 only). The twin draws
  base * exp(N(0, 0.03)): ±3 % at one sigma, p99 ≈ +7 % (≈ +15 ms on the Singapore pairs), an
  assumption that only widens p99.
- A call pays one round trip per attempt: it runs on an SDK connection kept alive (no TCP/TLS
  handshake per call; a cold connection would add one to two more round trips, not modelled).
- Client → API leg: one HTTP request on a kept-alive connection = one round trip. A producer "near"
  its region is in it: the leg is an in-region round trip, log-normal median 1.5 ms, sigma 0.5
  (inter-AZ round trips measured 0.25-3.37 ms, best of 50 pings, xkyle.com "Measuring AWS Region and
  AZ Latency"). A producer far from the API adds the inter-region round trip. API Gateway's and
  Lambda's own request overheads are not modelled: they are the same near and far.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

HOME = "us-east-1"
REGIONS = (HOME, "eu-west-1", "ap-southeast-1")
RTT_MS: dict[frozenset[str], float] = {
    frozenset({"us-east-1", "eu-west-1"}): 80.5,
    frozenset({"us-east-1", "ap-southeast-1"}): 216.7,
    frozenset({"eu-west-1", "ap-southeast-1"}): 238.1,
}
JITTER_SIGMA = 0.03
CLIENT_LEG_MEDIAN_S = 0.0015
CLIENT_LEG_SIGMA = 0.5


@dataclass
class Network:
    rng: random.Random = field(default_factory=lambda: random.Random(13))
    jitter_sigma: float = JITTER_SIGMA

    @staticmethod
    def base_rtt_s(a: str | None, b: str | None) -> float:
        """The pair's base round trip (0 in the same region, or when either side has no region)."""
        if a is None or b is None or a == b:
            return 0.0
        return RTT_MS[frozenset({a, b})] / 1000

    def rtt(self, a: str | None, b: str | None) -> float:
        """One round trip between two regions, with jitter."""
        base = self.base_rtt_s(a, b)
        return base * math.exp(self.rng.gauss(0.0, self.jitter_sigma)) if base else 0.0

    def client_leg(self, client: str, api: str) -> float:
        """A producer in region `client` sending one request to the HTTP API of region `api`."""
        in_region = CLIENT_LEG_MEDIAN_S * math.exp(self.rng.gauss(0.0, CLIENT_LEG_SIGMA))
        return in_region + self.rtt(client, api)
