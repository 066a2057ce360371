"""The pull-consumer job against `sluice local`: drains a queue into Parquet, acks only written rounds."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from glue_jobs import pull_consumer
from glue_jobs.common import ingest_date

ROOT = Path(__file__).resolve().parents[2]
MUST_SHOW = 20_000


def job_args(local, queue: str, output: Path, **extra: Any) -> pull_consumer.PullArgs:
    return pull_consumer.PullArgs(url=local.url, token=local.token, queue=queue, output=str(output), **extra)


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_64_shard_queue_is_read_to_the_last_message_including_a_handful_sent_last(spark, local, tmp_path):
    """Issue 22: the job stops on the pulls' exact signal (every shard read), never on a sampled backlog
    of 0: a few messages alone on some of 64 shards are read too."""
    queue = local.new_queue(min_shards=64, max_shards=64)
    sent = local.send(queue, 600)
    sent += [local.client.send(queue, {"n": f"last-{n}"})["message_ids"][0] for n in range(5)]
    out = tmp_path / "out"
    summary = pull_consumer.run(spark, job_args(local, queue, out, parallelism=2, round_messages=400))
    ids = [r.id for r in spark.read.parquet(str(out)).select("id").collect()]
    assert sorted(ids) == sorted(sent) and summary.messages == len(sent)
    assert summary.backlog == 0 and local.client.pull(queue, batch_size=10).drained


@pytest.mark.slow
def test_killed_midway_and_rerun_loses_nothing_and_duplicates_only_unacked_rounds(spark, local, tmp_path):
    """The driver is SIGKILLed right after round 2's write committed and before its ack: the worst
    moment. The rerun writes round 2 again (its leases were never acked) and everything else once."""
    queue = local.new_queue()
    sent = local.send(queue, 2000)
    out = tmp_path / "out"
    env = {**os.environ, pull_consumer.CRASH_ENV: "2", "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable, str(ROOT / "glue_jobs" / "pull_consumer.py"), "--master", "local[2]",
        "--url", local.url, "--token", local.token, "--queue", queue, "--output", str(out),
        "--round-messages", "500", "--round-seconds", "4", "--visibility-timeout-ms", "10000",
    ]  # fmt: skip
    crashed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    assert "round 1: 500 messages pulled, written and acked" in crashed.stderr

    rerun = pull_consumer.run(
        spark, job_args(local, queue, out, round_messages=1000, idle_timeout_seconds=40)
    )
    rows = spark.read.parquet(str(out)).select("id", "run_id", "round").collect()
    first_run = {r.run_id for r in rows} - {rerun.run_id}
    assert len(first_run) == 1
    by_round: dict[int, set[str]] = {}
    for r in rows:
        if r.run_id in first_run:
            by_round.setdefault(r.round, set()).add(r.id)
    assert sorted(by_round) == [1, 2] and all(len(ids) == 500 for ids in by_round.values())
    ids = [r.id for r in rows]
    duplicates = {i for i in set(ids) if ids.count(i) > 1}
    assert set(ids) == set(sent)  # the union holds every id
    assert duplicates == by_round[2]  # only the round written but never acked came back
    assert len(ids) == 2000 + 500 and rerun.messages == 1500
    assert rerun.backlog == 0


def test_pulled_rows_are_computed_once_even_when_used_by_two_jobs(spark):
    """The pull has side effects (leases): collecting the lease ids and writing the rows must not run it
    twice."""
    calls = spark.sparkContext.accumulator(0)

    def pull(index, _rows):
        calls.add(1)
        yield from ((index, n) for n in range(3))

    rdd = pull_consumer.pin(spark.sparkContext.parallelize(range(2), 2).mapPartitionsWithIndex(pull))
    assert len(rdd.map(lambda e: e[1]).collect()) == 6
    assert rdd.filter(lambda e: e[0] == 1).count() == 3
    spark.createDataFrame(rdd, "p int, n int").count()
    assert calls.value == 2  # one per partition, once
    rdd.unpersist()


def test_lease_keeper_extends_leases_while_the_write_runs_long(local):
    queue = local.new_queue()
    local.send(queue, 20)
    leases = [
        m.lease_id for m in local.client.pull(queue, batch_size=20, visibility_timeout_ms=1500).messages
    ]
    expires = int(time.time() * 1000) + 1500
    with pull_consumer.LeaseKeeper(local.client, queue, leases, 1500, expires) as keeper:
        time.sleep(3.5)  # a "write" more than twice the visibility timeout
        assert local.client.pull(queue, batch_size=20).messages == []  # still leased to us
    assert keeper.extensions >= 2
    assert local.client.ack(queue, leases)["ackCount"] == 20
