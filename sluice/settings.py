"""Runtime settings, read once from the environment variables named in `sluice.constants`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache

from pydantic import BaseModel, Field, field_validator

from sluice import constants as c


class Settings(BaseModel):
    """Where the engine's resources are. The stack sets these on every function; `sluice local` too."""

    control_table: str
    shard_tables: list[str] = Field(min_length=1)
    segment_bucket: str
    shard_map_prefix: str
    shard_map_ttl_seconds: float = 5.0
    token_cache_ttl_seconds: float = 30.0
    aws_endpoint_url: str | None = None
    stage: str = c.DEFAULT_STAGE
    lease_key_secret: str | None = None  # needed by whatever signs or verifies lease ids
    lease_key_cache_ttl_seconds: float = 60.0

    @field_validator("shard_tables", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return [t for t in value.split(",") if t] if isinstance(value, str) else value

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        fields = {
            "control_table": c.ENV_CONTROL_TABLE,
            "shard_tables": c.ENV_SHARD_TABLES,
            "segment_bucket": c.ENV_SEGMENT_BUCKET,
            "shard_map_prefix": c.ENV_SHARD_MAP_PREFIX,
            "shard_map_ttl_seconds": c.ENV_SHARD_MAP_TTL,
            "token_cache_ttl_seconds": c.ENV_TOKEN_CACHE_TTL,
            "aws_endpoint_url": c.ENV_AWS_ENDPOINT_URL,
            "stage": c.ENV_STAGE,
            "lease_key_secret": c.ENV_LEASE_KEY_SECRET,
            "lease_key_cache_ttl_seconds": c.ENV_LEASE_KEY_CACHE_TTL,
        }
        return cls.model_validate({name: env[var] for name, var in fields.items() if env.get(var)})

    def to_env(self) -> dict[str, str]:
        """The inverse of `from_env`: what the local runtime exports for the handlers."""
        env = {
            c.ENV_CONTROL_TABLE: self.control_table,
            c.ENV_SHARD_TABLES: ",".join(self.shard_tables),
            c.ENV_SEGMENT_BUCKET: self.segment_bucket,
            c.ENV_SHARD_MAP_PREFIX: self.shard_map_prefix,
            c.ENV_SHARD_MAP_TTL: str(self.shard_map_ttl_seconds),
            c.ENV_TOKEN_CACHE_TTL: str(self.token_cache_ttl_seconds),
            c.ENV_STAGE: self.stage,
            c.ENV_LEASE_KEY_CACHE_TTL: str(self.lease_key_cache_ttl_seconds),
        }
        if self.lease_key_secret:
            env[c.ENV_LEASE_KEY_SECRET] = self.lease_key_secret
        if self.aws_endpoint_url:
            env[c.ENV_AWS_ENDPOINT_URL] = self.aws_endpoint_url
        return env


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()


class CoordinatorSettings(BaseModel):
    """The coordinator's tuning from the environment the stack sets on its function (all optional: the
    defaults are `sluice.engine.coordinator.CoordinatorConfig`'s)."""

    period_seconds: float | None = None
    loop_seconds: float | None = None
    lease_seconds: float | None = None
    shard_wcu_ceiling: float | None = None
    scale_down_after_seconds: float | None = None
    shard_flush_seconds: float | None = None
    shard_maintenance_seconds: float | None = None
    shard_function: str | None = None
    consumer_function: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CoordinatorSettings:
        env = os.environ if environ is None else environ
        fields = {
            "period_seconds": c.ENV_COORDINATOR_PERIOD_SECONDS,
            "loop_seconds": c.ENV_COORDINATOR_LOOP_SECONDS,
            "lease_seconds": c.ENV_COORDINATOR_LEASE_SECONDS,
            "shard_wcu_ceiling": c.ENV_SHARD_WCU_CEILING,
            "scale_down_after_seconds": c.ENV_SCALE_DOWN_AFTER_SECONDS,
            "shard_flush_seconds": c.ENV_SHARD_FLUSH_SECONDS,
            "shard_maintenance_seconds": c.ENV_SHARD_MAINTENANCE_SECONDS,
            "shard_function": c.ENV_SHARD_FUNCTION,
            "consumer_function": c.ENV_CONSUMER_FUNCTION,
        }
        return cls.model_validate({name: env[var] for name, var in fields.items() if env.get(var)})
