"""The real engine (`sluice.service.Sluice`, `Coordinator`, `ShardWorker`) wired to the twin.

The adapters are the real ones (`sluice.adapters.dynamo.Table`, `sluice.adapters.s3.Bucket`,
`sluice.adapters.ssm.SsmMirror`); only the client under them is the twin's (SSM with its value limits
and throughput quota: bench/twin/ssm.py). The lease-key secret is a small in-memory stand-in. Each
container actor has its own engine (`World.container`), so its cached queue documents are its own, as
in a Lambda container.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

from botocore.exceptions import ClientError

from bench.twin.dynamo import STALE_MAX_S, Latency, TwinDynamo
from bench.twin.sim import Sim
from bench.twin.ssm import TwinMirror, TwinSsm
from sluice import codec
from sluice.adapters import aws
from sluice.adapters.dynamo import Table
from sluice.adapters.s3 import Bucket
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.engine.clock import Clock
from sluice.engine.invoker import Invoker
from sluice.engine.store.dynamo import DynamoShardStore
from sluice.local.gateway import TokenBucket
from sluice.local.template import ThrottleLimits
from sluice.models import Queue
from sluice.service import Sluice
from sluice.settings import Settings

SHARD_TABLES = 4
# S3 request latency, from AWS's published guidance (first byte, reads and writes alike):
# - S3 Standard: for requests under 512 KB "median latencies are often in the tens of milliseconds
#   range" (Best Practices Design Patterns: Optimizing Amazon S3 Performance, "Timeouts and Retries for
#   Latency-Sensitive Applications", https://docs.aws.amazon.com/whitepapers/latest/
#   s3-optimizing-performance-best-practices/timeouts-and-retries-for-latency-sensitive-applications.html),
#   which advises retrying a small GET or PUT after 2 s: median 30 ms, p99 ~100 ms here.
# - S3 Express One Zone: "consistent single-digit millisecond first-byte read and write request
#   latencies—up to 10x faster than S3 Standard" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/
#   s3-express-performance.html): median 5 ms, p99 ~11 ms here.
# Both add transfer at 100 MB/s (a Lambda function's network, about).
S3_STANDARD = Latency(median_s=0.030, sigma=0.52, rng=random.Random(3))
S3_EXPRESS = Latency(median_s=0.005, sigma=0.35, rng=random.Random(3))
# S3's request rates: "at least 3,500 PUT/COPY/POST/DELETE or 5,500 GET/HEAD requests per second per
# partitioned Amazon S3 prefix" ("Best practices design patterns: optimizing Amazon S3 performance"),
# past which it answers 503 SlowDown. The twin takes each key's directory as a prefix S3 has already
# partitioned (S3 splits a prefix under sustained load, over minutes, answering SlowDown meanwhile: the
# twin is optimistic there). The engine's S3 client retries a SlowDown as botocore does
# (`RETRY_CONFIG`, 6 attempts).
S3_WRITES_PER_PREFIX_S = 3_500
S3_READS_PER_PREFIX_S = 5_500
S3_ATTEMPTS = aws.RETRY_CONFIG.retries["total_max_attempts"]
LIST_PAGE_KEYS = 1_000  # ListObjectsV2 answers at most 1,000 keys a request (MaxKeys)
COORDINATOR_FUNCTION = "coordinator"
FAIL_FAST_ATTEMPTS = aws.FAIL_FAST_CONFIG.retries["total_max_attempts"]
KEYRING = json.dumps({"current_id": 1, "current": "twin-lease-key-" + "k" * 40})


class TwinTable(Table):
    def __init__(self, name: str, twin: TwinDynamo) -> None:
        super().__init__(name)
        self._twin = twin
        twin.create_table(name)

    @property
    def _client(self) -> Any:
        return self._twin

    @property
    def _fail_fast_client(self) -> Any:
        return self._twin.with_attempts(FAIL_FAST_ATTEMPTS)

    def pause(self, seconds: float) -> None:
        self._twin.sim.sleep(seconds)


class _S3Client:
    def __init__(self, sim: Sim, latency: Latency = S3_STANDARD, scale: float = 1.0) -> None:
        self.sim = sim
        self.latency = latency.fresh()
        self.objects: dict[str, bytes] = {}
        self.calls: list[tuple[str, float]] = []  # (operation, seconds waited)
        self.scale = scale  # a sampled scenario's share of each prefix's request rates
        self.prefixes: dict[tuple[str, bool], TokenBucket] = {}  # (prefix, writes?) -> its bucket
        self.slowdowns = 0  # attempts S3 answered SlowDown
        self.rng = random.Random(17)

    def _admit(self, op: str, key: str, *, write: bool) -> None:
        """A request on `key`'s prefix within S3's rate, after botocore's retries of a SlowDown."""
        prefix = key.rpartition("/")[0]
        bucket = self.prefixes.get((prefix, write))
        if bucket is None:
            rate = (S3_WRITES_PER_PREFIX_S if write else S3_READS_PER_PREFIX_S) * self.scale
            limits = ThrottleLimits(rate, max(1, round(rate)))
            bucket = self.prefixes[(prefix, write)] = TokenBucket(limits, lambda: self.sim.now)
        for attempt in range(1, S3_ATTEMPTS + 1):
            if bucket.take():
                return
            self.slowdowns += 1
            if attempt < S3_ATTEMPTS:
                self.sim.sleep(self.rng.random() * min(2 ** (attempt - 1), 20))
        raise ClientError({"Error": {"Code": "SlowDown", "Message": "Please reduce your request rate."}}, op)

    def _wait(self, op: str, nbytes: int = 0) -> None:
        took = self.latency.sample(nbytes / 1024)
        self.calls.append((op, took))
        self.sim.sleep(took)

    def put_object(self, Bucket: str, Key: str, Body: bytes, Tagging: str = "") -> dict:
        self._admit("PutObject", Key, write=True)
        self._wait("PutObject", len(Body))
        self.objects[Key] = bytes(Body)
        return {}

    def get_object(self, Bucket: str, Key: str, Range: str = "") -> dict:
        self._admit("GetObject", Key, write=False)
        data = self.objects.get(Key)
        if data is not None and Range:
            lo, hi = Range.removeprefix("bytes=").split("-")
            data = data[int(lo) : int(hi) + 1]
        self._wait("GetObject", len(data or b""))
        if data is None:
            raise ClientError({"Error": {"Code": "NoSuchKey", "Message": "NoSuchKey"}}, "GetObject")
        return {"Body": SimpleNamespace(read=lambda: data)}

    def delete_object(self, Bucket: str, Key: str) -> dict:
        self._admit("DeleteObject", Key, write=True)
        self._wait("DeleteObject")
        self.objects.pop(Key, None)
        return {}

    def delete_objects(self, Bucket: str, Delete: dict) -> dict:
        self._admit("DeleteObjects", Delete["Objects"][0]["Key"] if Delete["Objects"] else "", write=True)
        self._wait("DeleteObjects")
        for obj in Delete["Objects"]:
            self.objects.pop(obj["Key"], None)
        return {}

    def get_paginator(self, _name: str) -> Any:
        objects = self.objects

        def paginate(Bucket: str, Prefix: str, StartAfter: str = "") -> Iterator[dict]:
            """A page of at most 1,000 keys a request, as S3 lists them, fetched as the caller reads."""
            keys = [k for k in sorted(objects) if k.startswith(Prefix) and k > StartAfter]
            for first in range(0, len(keys) or 1, LIST_PAGE_KEYS):
                self._admit("ListObjectsV2", Prefix, write=False)
                self._wait("ListObjectsV2")
                yield {"Contents": [{"Key": k} for k in keys[first : first + LIST_PAGE_KEYS]]}

        return SimpleNamespace(paginate=paginate)


class TwinBucket(Bucket):
    def __init__(self, name: str, client: _S3Client) -> None:
        super().__init__(name)
        self._s3 = client

    @property
    def _client(self) -> Any:
        return self._s3


class _Secret:
    def read(self, force: bool = False) -> str:
        return KEYRING


@dataclass
class World:
    sim: Sim
    dynamo: TwinDynamo
    engine: Sluice  # set-up and admin calls (outside any container)
    ssm: TwinSsm
    invoker: Invoker | None = None  # what a container's wake starts (the scenario's coordinator)

    def container(self) -> Sluice:
        """The engine of the calling actor's container: made on its first call, kept for its life."""
        actor = self.sim.current
        if actor is None:
            return self.engine
        engine = actor.cache.get("engine")
        if engine is None:
            engine = actor.cache["engine"] = Sluice(
                self.engine.backend, read_lease_keys=lambda _force: KEYRING, invoker=self.invoker
            )
        return engine

    def queue(self, name: str) -> Queue:
        """The control item's document, read outside the model (no latency, no capacity)."""
        item = self.dynamo.tables[self.engine.backend.settings.control_table][keys.queue_pk(name)]
        return Queue.model_validate_json(item.items[keys.QUEUE_SK][keys.DOC]["S"])


def build(
    seed: int = 14, sample: float = 1.0, s3_latency: Latency = S3_STANDARD, *, stale_reads: bool = False
) -> World:
    """`sample`: the share of the load a scenario simulates (DynamoDB partitions and SSM's read quota
    are scaled alike); `s3_latency`: S3 Standard or Express One Zone; `stale_reads`: eventually
    consistent reads may answer from a copy up to a second behind (bench/twin/dynamo.py)."""
    sim = Sim()
    dynamo = TwinDynamo(sim, Latency(rng=random.Random(seed)), random.Random(seed + 1))
    dynamo.capacity_scale = sample
    dynamo.stale_max_s = STALE_MAX_S if stale_reads else 0.0
    ssm = TwinSsm(sim, scale=sample)
    mirror = TwinMirror(ssm)
    settings = Settings(
        control_table="twin-control",
        shard_tables=[f"twin-shards-{i}" for i in range(SHARD_TABLES)],
        segment_bucket="twin-segments",
        shard_map_prefix="/twin",
        coordinator_function=COORDINATOR_FUNCTION,
    )
    backend = Backend(
        settings=settings,
        control=TwinTable(settings.control_table, dynamo),
        shard_tables=[TwinTable(name, dynamo) for name in settings.shard_tables],
        mirror=mirror,
        bucket=TwinBucket(settings.segment_bucket, _S3Client(sim, s3_latency, scale=sample)),
        lease_secret=_Secret(),  # type: ignore[arg-type]
        clock=twin_clock(sim),
    )
    backend.store = twin_store(backend)
    engine = Sluice(backend, read_lease_keys=lambda _force: KEYRING)
    return World(sim, dynamo, engine, ssm)


def twin_clock(sim: Sim) -> Clock:
    """The engine's clock in virtual time: its waits (long-polls, commit backoff) are the actor's."""
    return Clock(now_ms=sim.now_ms, monotonic=sim.monotonic, sleep=sim.sleep)


def twin_store(backend: Backend) -> DynamoShardStore:
    """The real shard store, with batch encoding and decoding memoised: scenarios send the same batch
    over and over, and zlib on it was most of the simulation's wall time; the bytes stored are the
    codec's own, so nothing the twin measures changes (Lambda CPU is charged by the scenarios from
    measured figures, `bench.twin.lambdas.handler_cpu_s`, not from the simulation's own)."""
    return DynamoShardStore(backend, encode=_memo_encode, decode=_memo_decode)


@lru_cache(maxsize=256)
def _encode_key(key: tuple) -> bytes:
    return codec.encode_batch(
        codec.StoredMessage(b, ct, pk, dict(attrs), vis, ov, n) for b, ct, pk, attrs, vis, ov, n in key
    )


def _memo_encode(messages: Iterable[codec.StoredMessage]) -> bytes:
    key = tuple(
        (m.body, m.content_type, m.partition_key, tuple(sorted(m.attributes.items())), m.visible_at_ms,
         m.overflow_key, m.payload_len)
        for m in messages
    )  # fmt: skip
    return _encode_key(key)


@lru_cache(maxsize=256)
def _decode_tuple(blob: bytes) -> tuple[codec.StoredMessage, ...]:
    return tuple(codec.decode_batch(blob))


def _memo_decode(blob: bytes) -> Iterator[codec.StoredMessage]:
    return iter(_decode_tuple(bytes(blob)))


def percentile(values: list[float], p: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]
