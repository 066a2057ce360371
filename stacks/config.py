"""Stack configuration from CDK context (`-c key=value` or cdk.json), with defaults.

Every knob has a default so `python app.py` synthesizes with no arguments and no AWS credentials.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from typing import Any

from constructs import Node

from sluice import constants as c

# A function name (wildcards allowed) or a full Lambda function ARN, optionally qualified.
REGION_RE = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")
# The longest account id, for checking the segment bucket's name (account and region in it) fits S3's limit.
ACCOUNT_ID_PLACEHOLDER = "0" * 12
PUSH_TARGET_RE = re.compile(
    r"[A-Za-z0-9_*-]{1,140}|arn:aws[a-z-]*:lambda:[a-z0-9*-]+:(\d{12}|\*):function:[A-Za-z0-9_*-]+(:[A-Za-z0-9_$*-]+)?"
)


@dataclass(frozen=True)
class SluiceConfig:
    stage: str = c.DEFAULT_STAGE
    shard_table_count: int = c.DEFAULT_SHARD_TABLE_COUNT
    # Shard-table capacity: `on_demand`, or `provisioned` with target-tracking autoscaling between the
    # min and max units (read and write each, per table) at the target utilization (percent): about
    # 2.4x cheaper per unit at a steady load, but the minimum is paid when idle (docs/performance.md).
    capacity: str = c.CAPACITY_ON_DEMAND
    capacity_min_write: int = c.DEFAULT_CAPACITY_MIN_UNITS
    capacity_max_write: int = c.DEFAULT_CAPACITY_MAX_UNITS
    capacity_min_read: int = c.DEFAULT_CAPACITY_MIN_UNITS
    capacity_max_read: int = c.DEFAULT_CAPACITY_MAX_UNITS
    capacity_target_utilization: int = c.DEFAULT_CAPACITY_TARGET_UTILIZATION_PERCENT
    log_retention_days: int = 30
    api_throttle_rate: float = 1000.0  # steady-state requests per second on the $default stage
    api_throttle_burst: int = 2000
    # Routes throttled apart from the stage's default: comma-separated `<METHOD> <path>=<rate>:<burst>`
    # with route keys as `constants.ROUTES` has them, e.g. `POST /=5000:5000` for the SQS face, whose
    # every action is one route, or the pull route for many pullers (docs/deploy.md).
    api_route_throttles: str = ""
    # Alarms.
    alarm_oldest_message_age_seconds: float = 900.0
    alarm_lambda_errors: int = 5  # errors per function per 5 minutes
    alarm_ddb_throttles: int = 10  # throttled requests per table per 5 minutes
    # Data tables and the segment bucket survive `cdk destroy` unless a stage opts out (dev sandboxes).
    retain_data: bool = True
    lambda_memory_mb: int = c.DEFAULT_LAMBDA_MEMORY_MB
    # The consumer's own memory (0: `lambda_memory_mb`). A long-poll waits inside the consumer, billed
    # by the ms at its memory: 256 MB bills an idle wait a quarter of 1,024 MB's; a pull's CPU then runs
    # on a quarter of the vCPU (docs/performance.md "What an idle long-poll costs").
    consumer_memory_mb: int = 0
    # Powertools public layer: `powertools_layer_arn` wins; else the public SSM parameter for
    # `powertools_version` ("" = the aws-lambda-powertools version pinned in pyproject.toml).
    powertools_layer_arn: str = ""
    powertools_version: str = ""
    # Schedules (seconds; stacks/schedule.py): coordinator passes inside each one-minute run, and the
    # cadence of shard flushes and of compaction/retention sweeps.
    coordinator_tick_seconds: float = c.DEFAULT_COORDINATOR_TICK_SECONDS
    # Concurrency reserved for the coordinator (0: none, the default). Opt in where the account's
    # concurrency quota is low: 20 s long polls of many consumers could otherwise take every slot when
    # scaling is needed. Its runs stand down while one owns the pass, so 2 is plenty.
    coordinator_reserved_concurrency: int = 0
    # Concurrency reserved for the broker and for the consumer (0: none, the default). Every long-poll
    # holds a consumer execution for its wait, so a large puller fleet can take the account's quota
    # (1,000 by default) and leave sends throttled: reserving the broker's keeps sends apart, and a
    # consumer reservation also caps the pullers (Lambda refuses one past it: API Gateway answers its own
    # 500, which the SDK sends again for pulls and acks).
    # AWS keeps at least 100 of the account's quota unreserved.
    broker_reserved_concurrency: int = 0
    consumer_reserved_concurrency: int = 0
    shard_flush_seconds: float = c.DEFAULT_SHARD_FLUSH_SECONDS
    shard_maintenance_seconds: float = c.DEFAULT_SHARD_MAINTENANCE_SECONDS
    # Fallback when the SSM parameter is missing in a region: the layer's version number (the `:<n>` of
    # AWSLambdaPowertoolsPythonV3-python312-arm64), turned into an ARN for the deploy region.
    powertools_layer_version: int = 0
    # Lambda functions push consumers of type `lambda` may target: comma-separated function names or
    # ARNs, `*` wildcards allowed; `{stage}` is replaced by the stage. Empty: no Lambda push targets.
    push_lambda_targets: str = "sluice-{stage}-push-*"
    # Open Durable Streams protocol: /v1/stream/ paths starting with this prefix are served without a
    # token ("*": every path). Off ("") by default; for conformance runs and public demo streams.
    open_stream_prefix: str = ""
    # Multi-region (docs/deploy.md): comma-separated regions, the home region first. Set: one stack per
    # region (`SluiceStack-<region>`, `sluice-<stage>-<region>`), the control table a global table in
    # the home region's stack. Empty: the single-region `SluiceStack`.
    regions: str = ""

    @classmethod
    def from_node(cls, node: Node) -> SluiceConfig:
        """Read `<field>` context values; strings from `-c` are coerced to the field's type."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = node.try_get_context(f.name)
            if raw is None:
                continue
            values[f.name] = _coerce(raw, type(getattr(cls, f.name)))
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if not self.stage.replace("-", "").isalnum() or len(self.stage) > 20:
            raise ValueError(f"stage {self.stage!r}: use 1-20 letters, digits or '-'")
        if not 1 <= self.shard_table_count <= 64:
            raise ValueError("shard_table_count must be 1..64")
        if self.capacity not in (c.CAPACITY_ON_DEMAND, c.CAPACITY_PROVISIONED):
            raise ValueError(f"capacity must be {c.CAPACITY_ON_DEMAND} or {c.CAPACITY_PROVISIONED}")
        for kind in ("write", "read"):
            low, high = getattr(self, f"capacity_min_{kind}"), getattr(self, f"capacity_max_{kind}")
            if not 1 <= low <= high:
                raise ValueError(f"capacity_min_{kind} must be 1..capacity_max_{kind}")
        if not 20 <= self.capacity_target_utilization <= 90:  # what DynamoDB target tracking accepts
            raise ValueError("capacity_target_utilization must be 20..90 (percent)")
        if self.log_retention_days <= 0:
            raise ValueError("log_retention_days must be positive")
        if not 1 <= self.coordinator_tick_seconds <= c.COORDINATOR_SCHEDULE_MINUTES * 60 / 2:
            raise ValueError("coordinator_tick_seconds must be 1..half the schedule's period")
        _route_throttles(self.api_route_throttles)  # a bad entry fails synth with its reason
        for fn, reserved in self.reserved_concurrency.items():
            if reserved < 0:
                raise ValueError(f"{fn}_reserved_concurrency must be 0 (none) or more")
        if not 0 <= self.coordinator_reserved_concurrency <= 1000:
            raise ValueError("coordinator_reserved_concurrency must be 0 (none)..1000")
        lowest, highest = c.LAMBDA_MIN_MEMORY_MB, c.LAMBDA_MAX_MEMORY_MB
        if not lowest <= self.lambda_memory_mb <= highest:
            raise ValueError(f"lambda_memory_mb must be {lowest}..{highest} (Lambda's range)")
        if self.consumer_memory_mb and not lowest <= self.consumer_memory_mb <= highest:
            raise ValueError(f"consumer_memory_mb must be 0 (lambda_memory_mb) or {lowest}..{highest}")
        if self.shard_flush_seconds <= 0 or self.shard_maintenance_seconds <= 0:
            raise ValueError("shard_flush_seconds and shard_maintenance_seconds must be positive")
        if self.powertools_layer_version < 0:
            raise ValueError("powertools_layer_version must be a layer version number (0 = unset)")
        for target in self.push_lambda_target_list:
            if not PUSH_TARGET_RE.fullmatch(target):
                raise ValueError(
                    f"push_lambda_targets entry {target!r}: use a function name or a Lambda function "
                    "ARN (letters, digits, '-', '_', '*', ':' in ARNs)"
                )

        regions = self.region_list
        if regions:
            if len(regions) < 2 or len(set(regions)) != len(regions):
                raise ValueError(
                    "regions: list two or more distinct regions, home first (omit it for one region)"
                )
            if len(regions) > c.MAX_REGIONS:
                raise ValueError(f"regions: at most {c.MAX_REGIONS} (what a mirrored shard map can name)")
            for region in regions:
                if not REGION_RE.fullmatch(region):
                    raise ValueError(f"regions: {region!r} is not a region name like us-east-1")
                self.check_bucket_name(region)

    def check_bucket_name(self, region: str) -> None:
        """The segment bucket's name (`sluice-<stage>-segments-<account>-<region>`) must fit S3's limit."""
        bucket = c.physical_name(
            self.stage, c.LOGICAL_SEGMENT_BUCKET, account=ACCOUNT_ID_PLACEHOLDER, region=region
        )
        if len(bucket) > c.S3_BUCKET_NAME_MAX:
            raise ValueError(
                f"stage {self.stage!r}: the segment bucket name {bucket!r} is longer than "
                f"{c.S3_BUCKET_NAME_MAX} characters; use a shorter stage"
            )

    @property
    def region_list(self) -> list[str]:
        """The regions of a multi-region deployment, home first (empty: single region)."""
        return [r.strip() for r in self.regions.split(",") if r.strip()]

    @property
    def route_throttles(self) -> dict[str, tuple[float, int]]:
        """Route key -> (rate, burst) for the routes `api_route_throttles` throttles apart."""
        return _route_throttles(self.api_route_throttles)

    @property
    def reserved_concurrency(self) -> dict[str, int]:
        """Function name -> executions reserved for it, for the functions that have some."""
        wanted = {
            c.FN_BROKER: self.broker_reserved_concurrency,
            c.FN_CONSUMER: self.consumer_reserved_concurrency,
            c.FN_COORDINATOR: self.coordinator_reserved_concurrency,
        }
        return {fn: n for fn, n in wanted.items() if n}

    @property
    def memory_mb(self) -> dict[str, int]:
        """Function name -> its memory (MB)."""
        memory = dict.fromkeys(c.FUNCTION_HANDLERS, self.lambda_memory_mb)
        memory[c.FN_CONSUMER] = self.consumer_memory_mb or self.lambda_memory_mb
        return memory

    @property
    def push_lambda_target_list(self) -> list[str]:
        raw = self.push_lambda_targets.replace("{stage}", self.stage)
        return [t.strip() for t in raw.split(",") if t.strip()]


def _route_throttles(raw: str) -> dict[str, tuple[float, int]]:
    keys = {route.route_key for route in c.ROUTES}
    out: dict[str, tuple[float, int]] = {}
    for entry in filter(None, (e.strip() for e in raw.split(","))):
        key, _, limits = entry.rpartition("=")
        key, (rate, _, burst) = " ".join(key.split()), limits.partition(":")
        where = f"api_route_throttles entry {entry!r}"
        if key not in keys:
            raise ValueError(
                f"{where}: {key!r} is not a route; use `<METHOD> <path>` as constants.ROUTES lists them "
                "(e.g. `POST /` for the SQS face)"
            )
        try:
            out[key] = (float(rate), int(burst))
        except ValueError:
            raise ValueError(f"{where}: use `<METHOD> <path>=<rate>:<burst>`") from None
        if out[key][0] <= 0 or out[key][1] < 0:
            raise ValueError(f"{where}: the rate must be positive and the burst 0 or more")
    return out


def _coerce(raw: Any, typ: type) -> Any:
    if isinstance(raw, typ) and not (typ is int and isinstance(raw, bool)):
        return raw
    if typ is bool:
        if isinstance(raw, str):
            return raw.strip().lower() in {"1", "true", "yes", "on"}
        return bool(raw)
    if isinstance(raw, str) and typ in (int, float):
        return typ(json.loads(raw))
    return typ(raw)
