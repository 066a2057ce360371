"""The engine's handles on storage, built once per process from Settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from sluice.adapters.dynamo import Table
from sluice.adapters.s3 import Bucket
from sluice.adapters.secrets import Secret
from sluice.adapters.ssm import SsmMirror
from sluice.engine.clock import SYSTEM, Clock
from sluice.models import Shard
from sluice.settings import Settings

if TYPE_CHECKING:
    from sluice.engine.store import ShardStore


@dataclass(frozen=True)
class RegionStore:
    """One region's data plane: its shard tables, its segment bucket and its shard-map mirror."""

    region: str
    shard_tables: list[Table]
    bucket: Bucket
    mirror: SsmMirror

    @classmethod
    def from_settings(cls, settings: Settings, region: str) -> RegionStore:
        endpoint = settings.aws_endpoint_url
        return cls(
            region=region,
            shard_tables=[Table(name, endpoint, region) for name in settings.shard_tables],
            bucket=Bucket(settings.bucket_in(region), endpoint, region),
            mirror=SsmMirror(settings.shard_map_prefix, endpoint, region),
        )


@dataclass
class Backend:
    """`control` is where the authoritative control items are (the home region's table: every
    conditional write that fences goes there); `control_replica` this region's replica of it, for
    reads that tolerate replication lag (tokens, idempotency records). `shard_tables`, `mirror` and
    `bucket` are this process's own region; `remote` holds every other region of the deployment."""

    settings: Settings
    control: Table
    shard_tables: list[Table]
    mirror: SsmMirror
    bucket: Bucket
    lease_secret: Secret
    clock: Clock = field(default=SYSTEM)  # a bare `() -> int` is wrapped (see sluice.engine.clock)
    control_replica: Table | None = None  # None: `control` (single region, or this is the home region)
    remote: dict[str, RegionStore] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.clock = Clock.of(self.clock)

    @cached_property
    def store(self) -> ShardStore:
        """The one owner of the shard tables' items (HEAD, batch items, consumer-group states)."""
        from sluice.engine.store.dynamo import DynamoShardStore

        return DynamoShardStore(self)

    @classmethod
    def from_settings(cls, settings: Settings, clock: Clock | Callable[[], int] = SYSTEM) -> Backend:
        endpoint = settings.aws_endpoint_url
        home, own = settings.home_region, settings.region
        away = settings.multi_region and home != own
        return cls(
            settings=settings,
            control=Table(settings.control_table, endpoint, home if away else own),
            shard_tables=[Table(name, endpoint, own) for name in settings.shard_tables],
            mirror=SsmMirror(settings.shard_map_prefix, endpoint, own),
            bucket=Bucket(settings.segment_bucket, endpoint, own),
            lease_secret=Secret(settings.lease_key_secret, endpoint, settings.lease_key_cache_ttl_seconds),
            clock=Clock.of(clock),
            control_replica=Table(settings.control_table, endpoint, own) if away else None,
            remote={r: RegionStore.from_settings(settings, r) for r in settings.regions if r != own},
        )

    @property
    def region(self) -> str | None:
        """This process's region (None: a single-region deployment)."""
        return self.settings.region

    @property
    def local_control(self) -> Table:
        """This region's copy of the control table: for reads that tolerate replication lag."""
        return self.control_replica or self.control

    def region_of(self, shard: Shard) -> str | None:
        """The region a shard's table is in (a shard without one is in the home region)."""
        return shard.region or self.settings.home_region

    def is_local(self, shard: Shard) -> bool:
        where = self.region_of(shard)
        return where is None or where == self.region

    def _remote_store(self, region: str | None) -> RegionStore | None:
        """Another region's store; None when `region` (None: the home region's) is this process's own."""
        where = region or self.settings.home_region
        return None if where is None or where == self.region else self.remote[where]

    def table_for(self, shard: Shard) -> Table:
        store = self._remote_store(shard.region)
        tables = self.shard_tables if store is None else store.shard_tables
        return tables[shard.table % len(tables)]

    def bucket_in(self, region: str | None) -> Bucket:
        """The segment bucket of `region` (None: the home region's, as for a shard without a region)."""
        store = self._remote_store(region)
        return self.bucket if store is None else store.bucket

    def bucket_for(self, shard: Shard) -> Bucket:
        """The segment bucket of the shard's region (a stream's history stays in its region)."""
        return self.bucket_in(shard.region)

    @property
    def mirrors(self) -> list[SsmMirror]:
        """Every region's shard-map mirror, this region's first."""
        return [self.mirror, *(store.mirror for store in self.remote.values())]
