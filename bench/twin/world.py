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
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

from botocore.exceptions import ClientError

from bench.twin.dynamo import Latency, TwinDynamo
from bench.twin.sim import Sim
from bench.twin.ssm import TwinMirror, TwinSsm
from sluice import codec
from sluice.adapters import aws
from sluice.adapters.dynamo import Table
from sluice.adapters.s3 import Bucket
from sluice.engine import consume, keys, publish
from sluice.engine.backend import Backend
from sluice.engine.invoker import Invoker
from sluice.models import Queue
from sluice.service import Sluice
from sluice.settings import Settings

SHARD_TABLES = 4
# S3: "first-byte-out latencies ... of roughly 100-200 milliseconds" for small objects (AWS, S3 performance
# design patterns).
S3_LATENCY = Latency(median_s=0.1, sigma=0.3, rng=random.Random(3))
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


class _S3Client:
    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self.objects: dict[str, bytes] = {}

    def put_object(self, Bucket: str, Key: str, Body: bytes) -> dict:
        self.sim.sleep(S3_LATENCY.sample(len(Body) / 1024))
        self.objects[Key] = bytes(Body)
        return {}

    def get_object(self, Bucket: str, Key: str) -> dict:
        self.sim.sleep(S3_LATENCY.sample())
        if Key not in self.objects:
            raise ClientError({"Error": {"Code": "NoSuchKey", "Message": "NoSuchKey"}}, "GetObject")
        data = self.objects[Key]
        return {"Body": SimpleNamespace(read=lambda: data)}

    def delete_object(self, Bucket: str, Key: str) -> dict:
        self.sim.sleep(S3_LATENCY.sample())
        self.objects.pop(Key, None)
        return {}

    def get_paginator(self, _name: str) -> Any:
        objects = self.objects

        def paginate(Bucket: str, Prefix: str) -> list[dict]:
            self.sim.sleep(S3_LATENCY.sample())
            return [{"Contents": [{"Key": k} for k in sorted(objects) if k.startswith(Prefix)]}]

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


def build(seed: int = 14, sample: float = 1.0) -> World:
    """`sample`: the share of the load a scenario simulates (DynamoDB partitions and SSM's read quota
    are scaled alike)."""
    sim = Sim()
    dynamo = TwinDynamo(sim, Latency(rng=random.Random(seed)), random.Random(seed + 1))
    dynamo.capacity_scale = sample
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
        bucket=TwinBucket(settings.segment_bucket, _S3Client(sim)),
        lease_secret=_Secret(),  # type: ignore[arg-type]
        clock=sim.now_ms,
    )
    engine = Sluice(backend, read_lease_keys=lambda _force: KEYRING)
    return World(sim, dynamo, engine, ssm)


@contextmanager
def virtual_time(sim: Sim):
    """The consumer's commit backoff sleeps in virtual time, charged to the actor. Batch encoding and
    decoding are memoised: scenarios send the same batch over and over, and zlib on it was most of
    the simulation's wall time; the bytes stored are the codec's own, so nothing the twin measures
    changes (only Lambda CPU, which the twin does not model)."""
    real = consume.time, publish.encode_batch, consume.decode_batch
    consume.time = SimpleNamespace(sleep=sim.sleep, monotonic=sim.monotonic)  # type: ignore[assignment]
    publish.encode_batch = _memo_encode
    consume.decode_batch = _memo_decode
    try:
        yield
    finally:
        consume.time, publish.encode_batch, consume.decode_batch = real


@lru_cache(maxsize=256)
def _encode_key(key: tuple) -> bytes:
    return codec.encode_batch(
        codec.StoredMessage(b, ct, pk, dict(attrs), vis, ov) for b, ct, pk, attrs, vis, ov in key
    )


def _memo_encode(messages: Iterable[codec.StoredMessage]) -> bytes:
    key = tuple(
        (m.body, m.content_type, m.partition_key, tuple(sorted(m.attributes.items())), m.visible_at_ms,
         m.overflow_key)
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
