"""Runtime settings, read once from the environment variables named in `sluice.constants`.

The one reader of the environment for Lambda and engine code: handlers and the engine are handed
these values. (The local runtime and the CLI set variables for the processes they start.)"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache

from pydantic import BaseModel, Field, field_validator

from sluice import constants as c


def _read(environ: Mapping[str, str], variables: Mapping[str, str]) -> dict[str, str]:
    """The fields whose variable is set and not empty (empty means unset, as the stack writes it)."""
    return {name: environ[var] for name, var in variables.items() if environ.get(var)}


class CoordinatorSettings(BaseModel):
    """The coordinator's cadence and policy overrides (`stacks/schedule.py`, `sluice local`); None
    keeps the engine's default."""

    period_seconds: float | None = None
    loop_seconds: float | None = None
    lease_seconds: float | None = None
    shard_flush_seconds: float | None = None
    shard_maintenance_seconds: float | None = None
    shard_wcu_ceiling: float | None = None
    scale_down_after_seconds: float | None = None
    shard_function: str | None = None
    consumer_function: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CoordinatorSettings:
        return cls.model_validate(_read(os.environ if environ is None else environ, _COORDINATOR_ENV))


_COORDINATOR_ENV = {
    "period_seconds": c.ENV_COORDINATOR_PERIOD_SECONDS,
    "loop_seconds": c.ENV_COORDINATOR_LOOP_SECONDS,
    "lease_seconds": c.ENV_COORDINATOR_LEASE_SECONDS,
    "shard_flush_seconds": c.ENV_SHARD_FLUSH_SECONDS,
    "shard_maintenance_seconds": c.ENV_SHARD_MAINTENANCE_SECONDS,
    "shard_wcu_ceiling": c.ENV_SHARD_WCU_CEILING,
    "scale_down_after_seconds": c.ENV_SCALE_DOWN_AFTER_SECONDS,
    "shard_function": c.ENV_SHARD_FUNCTION,
    "consumer_function": c.ENV_CONSUMER_FUNCTION,
}


class Settings(BaseModel):
    """Where the engine's resources are. The stack sets these on every function; `sluice local` too."""

    control_table: str
    shard_tables: list[str] = Field(min_length=1)
    segment_bucket: str
    shard_map_prefix: str
    token_cache_ttl_seconds: float = 30.0
    aws_endpoint_url: str | None = None
    stage: str = c.DEFAULT_STAGE
    lease_key_secret: str | None = None  # needed by whatever signs or verifies lease ids
    lease_key_cache_ttl_seconds: float = 60.0
    lambda_endpoint_url: str | None = None  # the local runtime serves Lambda Invoke; None: AWS
    coordinator_function: str | None = None  # what a throttled broker wakes (sluice/engine/wake.py)
    allow_local_webhooks: bool = False  # http://127.0.0.1 push targets: `sluice local` only
    open_stream_prefix: str = ""  # open-protocol paths served without a token ("*": all; "": none)
    coordinator: CoordinatorSettings = Field(default_factory=CoordinatorSettings)
    # Multi-region: every region of the deployment, home first (empty: a single-region deployment);
    # this process's region; and every region's segment bucket. Shard tables, the control table and
    # the SSM path have the same names in every region.
    regions: list[str] = Field(default_factory=list)
    region: str | None = None
    segment_buckets: dict[str, str] = Field(default_factory=dict)

    @field_validator("shard_tables", "regions", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return [t for t in value.split(",") if t] if isinstance(value, str) else value

    @field_validator("segment_buckets", mode="before")
    @classmethod
    def _pairs(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        return dict(pair.split("=", 1) for pair in value.split(",") if pair)

    @property
    def multi_region(self) -> bool:
        return len(self.regions) > 1

    @property
    def home_region(self) -> str | None:
        """Where the authoritative control items are (None: single region, the process's own)."""
        return self.regions[0] if self.regions else None

    def bucket_in(self, region: str | None) -> str:
        """The segment bucket of `region` (None or this process's region: its own bucket)."""
        if region is None or region == self.region:
            return self.segment_bucket
        return self.segment_buckets[region]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        fields = {**_read(env, _ENV), "coordinator": CoordinatorSettings.from_env(env)}
        if "allow_local_webhooks" in fields:
            fields["allow_local_webhooks"] = fields["allow_local_webhooks"] == "1"
        return cls.model_validate(fields)

    def to_env(self) -> dict[str, str]:
        """The inverse of `from_env` for the resource settings: what the local runtime exports for
        the handlers (it sets the coordinator's and its own variables itself)."""
        env = {
            c.ENV_CONTROL_TABLE: self.control_table,
            c.ENV_SHARD_TABLES: ",".join(self.shard_tables),
            c.ENV_SEGMENT_BUCKET: self.segment_bucket,
            c.ENV_SHARD_MAP_PREFIX: self.shard_map_prefix,
            c.ENV_TOKEN_CACHE_TTL: str(self.token_cache_ttl_seconds),
            c.ENV_STAGE: self.stage,
            c.ENV_LEASE_KEY_CACHE_TTL: str(self.lease_key_cache_ttl_seconds),
        }
        if self.lease_key_secret:
            env[c.ENV_LEASE_KEY_SECRET] = self.lease_key_secret
        if self.aws_endpoint_url:
            env[c.ENV_AWS_ENDPOINT_URL] = self.aws_endpoint_url
        if self.regions:
            env[c.ENV_REGIONS] = ",".join(self.regions)
        if self.region:
            env[c.ENV_REGION] = self.region
        if self.segment_buckets:
            env[c.ENV_SEGMENT_BUCKETS] = ",".join(f"{r}={b}" for r, b in self.segment_buckets.items())
        return env


_ENV = {
    "control_table": c.ENV_CONTROL_TABLE,
    "shard_tables": c.ENV_SHARD_TABLES,
    "segment_bucket": c.ENV_SEGMENT_BUCKET,
    "shard_map_prefix": c.ENV_SHARD_MAP_PREFIX,
    "token_cache_ttl_seconds": c.ENV_TOKEN_CACHE_TTL,
    "aws_endpoint_url": c.ENV_AWS_ENDPOINT_URL,
    "stage": c.ENV_STAGE,
    "lease_key_secret": c.ENV_LEASE_KEY_SECRET,
    "lease_key_cache_ttl_seconds": c.ENV_LEASE_KEY_CACHE_TTL,
    "lambda_endpoint_url": c.ENV_LAMBDA_ENDPOINT_URL,
    "coordinator_function": c.ENV_COORDINATOR_FUNCTION,
    "allow_local_webhooks": c.ENV_ALLOW_LOCAL_WEBHOOKS,
    "open_stream_prefix": c.ENV_OPEN_STREAM_PREFIX,
    "regions": c.ENV_REGIONS,
    "region": c.ENV_REGION,
    "segment_buckets": c.ENV_SEGMENT_BUCKETS,
}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()
