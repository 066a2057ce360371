"""The pull-consumer job against `sluice local`: drains a queue into Parquet, acks only written rounds."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from glue_jobs import pull_consumer
from glue_jobs.common import ingest_date, parse_args

ROOT = Path(__file__).resolve().parents[2]
MUST_SHOW = 20_000


def job_args(local, queue: str, output: Path, **extra: object) -> dict:
    args = {"url": local.url, "token": local.token, "queue": queue, "output": str(output)}
    args.update(extra)
    return parse_args([], {**pull_consumer.DEFAULTS, **args})


def test_20000_messages_into_parquet_with_distinct_ids_and_no_backlog(spark, local, tmp_path):
    queue = local.new_queue()
    t0 = time.monotonic()
    sent = local.send(queue, MUST_SHOW)
    send_s = time.monotonic() - t0
    out = tmp_path / "out"
    summary = pull_consumer.run(spark, job_args(local, queue, out, parallelism=2))
    print(f"\nsent {MUST_SHOW} in {send_s:.1f} s; job: {summary.as_dict()}")
    frame = spark.read.parquet(str(out))
    ids = {r.id for r in frame.select("id").collect()}
    assert ids == set(sent)
    assert frame.count() == MUST_SHOW == summary.messages
    assert summary.backlog == 0
    assert local.client.pull(queue, batch_size=100).messages == []
    row = frame.where(frame.id == sent[7]).collect()[0]
    assert row.body == '{"n":7,"pad":"' + "x" * 100 + '"}'
    assert row.attributes == {"n": "7"} and row.partition_key == "k0" and row.content_type == "json"
    assert row.attempts == 1 and str(row.ingest_date) == ingest_date(row.timestamp_ms)
