"""One local SparkSession and one `sluice local` runtime for the whole Spark suite (each takes seconds
to start). Executors are separate Python processes: they reach the runtime and moto over HTTP."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java", allow_module_level=True)

SPARK_ENV = {
    "PYSPARK_PYTHON": sys.executable,
    "PYSPARK_DRIVER_PYTHON": sys.executable,
    "SPARK_LOCAL_IP": "127.0.0.1",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    os.environ.update(SPARK_ENV)
    started = time.monotonic()
    session = (
        SparkSession.builder.master("local[2]")
        .appName("sluice-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    print(f"\nSparkSession started in {time.monotonic() - started:.1f} s")
    yield session
    session.stop()


class Local:
    """`sluice local` in-process: its URL, an admin client, and helpers to fill queues fast."""

    def __init__(self, runtime: Any, token: str) -> None:
        from sluice.client import SluiceClient

        self.runtime = runtime
        self.token = token
        self.url = runtime.url
        self.client = SluiceClient(runtime.url, token, pool_size=16)

    def new_queue(self, **settings: Any) -> str:
        name = f"sp-{uuid.uuid4().hex[:8]}"
        self.client.create_queue(name, **settings)
        return name

    def send(self, queue: str, count: int, start: int = 0, threads: int = 8) -> list[str]:
        """`count` json messages {"n": i}, in parallel batches of 100; returns their ids in order."""

        def batch(first: int) -> list[str]:
            msgs = [
                {
                    "body": {"n": n, "pad": "x" * 100},
                    "attributes": {"n": str(n)},
                    "partition_key": f"k{n % 7}",
                }
                for n in range(first, min(start + count, first + 100))
            ]
            return self.client.send_batch(queue, msgs)["message_ids"]

        with ThreadPoolExecutor(threads) as pool:
            return [i for ids in pool.map(batch, range(start, start + count, 100)) for i in ids]


@pytest.fixture(scope="session")
def local() -> Iterator[Local]:
    from sluice.local.runtime import LocalRuntime

    token = "spark-" + secrets.token_hex(6)
    runtime = LocalRuntime(port=0, admin_token=token)
    runtime.start()
    helper = Local(runtime, token)
    yield helper
    helper.client.close()
    runtime.stop()
