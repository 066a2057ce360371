"""The engine's handles on storage, built once per process from Settings."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sluice.adapters.dynamo import Table
from sluice.adapters.s3 import Bucket
from sluice.adapters.secrets import Secret
from sluice.adapters.ssm import SsmMirror
from sluice.models import Shard
from sluice.settings import Settings


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Backend:
    settings: Settings
    control: Table
    shard_tables: list[Table]
    mirror: SsmMirror
    bucket: Bucket
    lease_secret: Secret
    clock: Callable[[], int] = field(default=now_ms)

    @classmethod
    def from_settings(cls, settings: Settings, clock: Callable[[], int] = now_ms) -> Backend:
        endpoint = settings.aws_endpoint_url
        return cls(
            settings=settings,
            control=Table(settings.control_table, endpoint),
            shard_tables=[Table(name, endpoint) for name in settings.shard_tables],
            mirror=SsmMirror(settings.shard_map_prefix, endpoint),
            bucket=Bucket(settings.segment_bucket, endpoint),
            lease_secret=Secret(settings.lease_key_secret, endpoint, settings.lease_key_cache_ttl_seconds),
            clock=clock,
        )

    def table_for(self, shard: Shard) -> Table:
        return self.shard_tables[shard.table % len(self.shard_tables)]
