"""SSM Parameter Store in virtual time: what `sluice.adapters.ssm.SsmMirror` calls, with AWS's limits.

Model (each documented where it comes from):
- Values: Standard ≤ 4,096 B, Advanced ≤ 8,192 B, and an Advanced parameter never goes back to Standard
  (ValidationException), as `sluice/local/moto_patches.py` enforces on moto.
- Throughput per account and region: GetParameter, GetParameters and GetParametersByPath share 40
  transactions per second by default ("Parameter Store throughput", AWS Systems Manager quotas; one
  GetParameters call of up to 10 names is one transaction); PutParameter has its own, 3 per second
  (not published; AWS Support's figure, github-aws-runners/terraform-aws-github-runner#2944). A token
  bucket holding one second of each; beyond it `ThrottlingException` (botocore `ClientError`).
  Sampled scenarios scale the read quota with the load (`scale`): 1/k of the containers share 1/k of it.
- The SDK's retries as botocore's standard mode does them: the mirror's calls make one attempt
  (`sluice.adapters.aws.FAIL_FAST_CONFIG`: a throttled read falls back to the control item, a throttled
  write is repaired by the coordinator).
- Latency: not published; a DynamoDB round trip doubled (log-normal, median 8 ms), plus the
  inter-region round trip for another region's parameters.

Every attempt is counted per virtual second (`reads`, `read_throttles`, `puts`, `put_throttles`), so a
scenario can show the calls it made against the quota.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from bench.twin.dynamo import Latency
from bench.twin.network import Network
from bench.twin.sim import Sim
from sluice.adapters.ssm import ADVANCED_MAX_BYTES, STANDARD_MAX_BYTES, SsmMirror

READ_TPS = 40.0
PUT_TPS = 3.0
READ_ATTEMPTS = 1
WRITE_ATTEMPTS = 1  # one value: fail fast (the coordinator repairs it)
SPLIT_WRITE_ATTEMPTS = 5  # the parts of a split document: RETRY_CONFIG
SSM_LATENCY = Latency(median_s=0.008, sigma=0.45, rng=random.Random(5))


def _error(code: str, operation: str, message: str = "") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message or code}}, operation)


@dataclass
class _Bucket:
    rate: float
    tokens: float = 0.0
    at: float = 0.0

    def take(self, now: float) -> bool:
        self.tokens = min(self.rate, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


@dataclass
class SsmStats:
    reads: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))  # attempts, by second
    read_throttles: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    puts: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    put_throttles: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    largest_value: int = 0


class TwinSsm:
    """The low-level SSM client's calls the mirror makes, for one account and region."""

    def __init__(
        self,
        sim: Sim,
        *,
        scale: float = 1.0,
        region: str | None = None,
        network: Network | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.sim = sim
        self.region = region
        self.network = network
        self.rng = rng or random.Random(17)
        self.latency = SSM_LATENCY.fresh()
        self.params: dict[str, tuple[str, str]] = {}  # name -> (value, tier)
        self.read_bucket = _Bucket(READ_TPS * scale, READ_TPS * scale)
        self.put_bucket = _Bucket(PUT_TPS, PUT_TPS)
        self.stats = SsmStats()
        self.put_attempts = WRITE_ATTEMPTS

    # -- the calls --

    def get_parameter(self, Name: str) -> dict[str, Any]:
        self._read("GetParameter")
        if Name not in self.params:
            raise _error("ParameterNotFound", "GetParameter")
        return {"Parameter": {"Name": Name, "Value": self.params[Name][0]}}

    def get_parameters(self, Names: list[str]) -> dict[str, Any]:
        self._read("GetParameters")
        return {"Parameters": [{"Name": n, "Value": self.params[n][0]} for n in Names if n in self.params]}

    def get_parameters_by_path(
        self, Path: str, Recursive: bool = False, MaxResults: int = 10, NextToken: str | None = None
    ) -> dict[str, Any]:
        self._read("GetParametersByPath")
        prefix = Path.rstrip("/") + "/"
        names = sorted(
            n for n in self.params if n.startswith(prefix) and (Recursive or "/" not in n[len(prefix) :])
        )
        start = int(NextToken or 0)
        page = names[start : start + MaxResults]
        out: dict[str, Any] = {"Parameters": [{"Name": n, "Value": self.params[n][0]} for n in page]}
        if start + MaxResults < len(names):
            out["NextToken"] = str(start + MaxResults)
        return out

    def put_parameter(
        self, Name: str, Value: str, Type: str = "String", Overwrite: bool = False, Tier: str = "Standard"
    ) -> dict[str, Any]:
        self._attempts(
            "PutParameter", self.put_bucket, WRITE_ATTEMPTS, self.stats.puts, self.stats.put_throttles
        )
        size = len(Value.encode())
        current = self.params.get(Name)
        if size > (ADVANCED_MAX_BYTES if Tier == "Advanced" else STANDARD_MAX_BYTES):
            raise _error("ValidationException", "PutParameter", f"{Tier} value of {size} bytes")
        if Tier == "Standard" and current is not None and current[1] == "Advanced":
            raise _error("ValidationException", "PutParameter", "no downgrade from Advanced")
        self.params[Name] = (Value, Tier)
        self.stats.largest_value = max(self.stats.largest_value, size)
        return {"Version": 1, "Tier": Tier}

    def delete_parameters(self, Names: list[str]) -> dict[str, Any]:
        self.sim.sleep(self._latency())
        for name in Names:
            self.params.pop(name, None)
        return {"DeletedParameters": Names}

    # -- the model --

    def _read(self, operation: str) -> None:
        self._attempts(
            operation, self.read_bucket, READ_ATTEMPTS, self.stats.reads, self.stats.read_throttles
        )

    def _attempts(
        self,
        operation: str,
        bucket: _Bucket,
        attempts: int,
        calls: defaultdict[int, int],
        throttles: defaultdict[int, int],
    ) -> None:
        for attempt in range(1, attempts + 1):
            second = int(self.sim.now)
            calls[second] += 1
            admitted = bucket.take(self.sim.now)
            self.sim.sleep(self._latency())
            if admitted:
                return
            throttles[second] += 1
            if attempt < attempts:
                self.sim.sleep(self.rng.random() * min(2 ** (attempt - 1), 20))
        raise _error("ThrottlingException", operation, "Rate exceeded")

    def _latency(self) -> float:
        own = self.latency.sample()
        if self.network is None:
            return own
        return own + self.network.rtt(getattr(self.sim.current, "region", None), self.region)


class TwinMirror(SsmMirror):
    """The real mirror adapter (splitting, tags, tiers) over the twin's SSM."""

    def __init__(self, ssm: TwinSsm, prefix: str = "/twin", region: str | None = None) -> None:
        super().__init__(prefix, None, region)
        self.ssm = ssm

    @property
    def _client(self) -> Any:
        return _Retrying(self.ssm)

    @property
    def _fast_client(self) -> Any:
        return self.ssm


class _Retrying:
    """The twin's SSM as the mirror's retrying client (RETRY_CONFIG) sees it: puts try 5 times."""

    def __init__(self, ssm: TwinSsm) -> None:
        self._ssm = ssm

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ssm, name)

    def put_parameter(self, **kwargs: Any) -> dict[str, Any]:
        self._ssm.put_attempts = SPLIT_WRITE_ATTEMPTS
        try:
            return self._ssm.put_parameter(**kwargs)
        finally:
            self._ssm.put_attempts = WRITE_ATTEMPTS
