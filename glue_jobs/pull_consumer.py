"""Glue / EMR job: drain a Sluice queue through the HTTP pull API into Parquet, at-least-once.

Runs on Glue 5 / EMR 7 (Spark 3.5) and Glue 6 / EMR 8 (Spark 4.x), and locally:
    python glue_jobs/pull_consumer.py --url http://127.0.0.1:8787 --token T --queue orders \
        --output ./out/orders [--master local[2]]

Arguments (`--key value`; Glue passes them the same way):
  --url                  API base URL (required)
  --queue                queue name (required)
  --output               output path, s3://... or a local directory (required)
  --token                Bearer token (read+write scopes: acks change state), or
  --token-secret-arn     a Secrets Manager secret holding the token (plain, or JSON {"token": ...})
  --auth                 token [default] | iam: sign requests with SigV4 (execute-api) as the job role
  --region               region for SigV4 / Secrets Manager [from the environment]
  --consumer-group       [default]
  --parallelism          pullers = Spark tasks per round [spark.default.parallelism]
  --batch-size           messages per pull call, 1..100 [100]
  --round-messages       messages per round, written and acked together [10000]
  --round-seconds        a round stops pulling after this long [30]
  --expected-write-seconds  how long a round's write may take before leases are extended [60]
  --visibility-timeout-ms   lease length per pull [(round + expected write seconds) * 1000 + 10 s]
  --wait-time-ms         long-poll per pull [1000]
  --idle-timeout-seconds when pulls come back empty while messages are still in flight elsewhere,
                         keep trying this long [10]
  --max-messages         stop after about this many messages [0 = until drained]
  --max-seconds          stop starting rounds after this long [0 = until drained]
  --compression          Parquet codec [snappy]
  --summary-path         write the run summary as JSON to this local path
  --verify-output        after the run, count rows and distinct ids in the whole output (summary)
  --master               Spark master when run outside spark-submit/Glue [local[*]]

How it works, per round:
 1. The driver starts `parallelism` tasks; each pulls batches (visibility timeout covering the round and
    its write) until it holds its share of `round-messages`, `round-seconds` pass, or a pull is empty.
 2. The pulled rows stay on the executors (persisted and *locally checkpointed*): a lost block fails
    the job instead of re-running the pull, so the data written is exactly the data whose leases the
    driver holds. The driver collects only (message id, lease id) pairs.
 3. The round is appended to Parquet (`partitionBy("ingest_date")`), Spark's commit protocol makes it
    visible atomically; a lease keeper thread extends the leases while the write is slower than planned.
 4. Only after the write committed, the driver acks the round's leases (1,000 per call).
A crash before 4 leaves the round's leases unacked: those messages come back after their visibility
timeout and are written again by the rerun. Nothing is lost; the only duplicates are messages of rounds
written but not acked. Deduplicate by message id, e.g.
    spark.read.parquet(out).dropDuplicates(["id"])
or `MERGE INTO t USING s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *` in Iceberg/Delta; `run_id` and
`round` say which run and round wrote each copy, `ingest_date` (the publish date) puts both copies in the
same partition.

Output columns: id, body (JSON text | the string | base64 for bytes), content_type,
attributes map<string,string>, partition_key, timestamp_ms (publish time), attempts, pulled_at_ms,
run_id, round, and the partition column ingest_date (publish date, UTC).
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

if __package__ in (None, ""):  # run as a script from the repo; on Glue/spark-submit the zip is on sys.path
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from glue_jobs.arguments import ArgumentError, check, parse_args
from glue_jobs.common import (
    OUTPUT_COLUMNS,
    ApiConfig,
    backs_off,
    body_text,
    call_with_conflict_retry,
    configure_logging,
    ingest_date,
    resolve_token,
    spark_session,
)

LOG = logging.getLogger(__name__)
PULL_OUTPUT_SCHEMA = OUTPUT_COLUMNS + ", pulled_at_ms bigint, run_id string, round int, ingest_date string"
LEASES_PER_CALL = 1000  # the API's limit for acks and lease extensions per request
CRASH_ENV = "SLUICE_JOB_CRASH_AFTER_WRITE_ROUND"  # fault injection: SIGKILL after round N's write


@dataclass(frozen=True)
class PullArgs:
    """The job's arguments (see the module docstring)."""

    url: str
    queue: str
    output: str
    token: str | None = None
    token_secret_arn: str | None = None
    auth: str = "token"
    region: str | None = None
    consumer_group: str = "default"
    parallelism: int = 0
    batch_size: int = 100
    round_messages: int = 10_000
    round_seconds: float = 30.0
    expected_write_seconds: float = 60.0
    visibility_timeout_ms: int = 0
    wait_time_ms: int = 1000
    idle_timeout_seconds: float = 10.0
    max_messages: int = 0
    max_seconds: float = 0.0
    compression: str = "snappy"
    summary_path: str | None = None
    verify_output: bool = False
    master: str | None = None
    job_name: str = "sluice-pull-consumer"

    def __post_init__(self) -> None:
        check(all((self.url, self.queue, self.output)), "--url, --queue and --output must not be empty")
        check(self.auth in ("token", "iam"), f"--auth must be token or iam, not {self.auth!r}")
        check(
            self.auth == "iam" or bool(self.token or self.token_secret_arn),
            "give --token or --token-secret-arn (or --auth iam)",
        )
        check(1 <= self.batch_size <= 100, f"--batch-size must be 1..100, not {self.batch_size}")
        check(self.round_messages > 0, "--round-messages must be positive")
        check(self.round_seconds > 0, "--round-seconds must be positive")
        for name in ("parallelism", "visibility_timeout_ms", "wait_time_ms", "max_messages", "max_seconds"):
            check(getattr(self, name) >= 0, f"--{name.replace('_', '-')} must not be negative")


@dataclass
class Summary:
    queue: str
    output: str
    run_id: str
    messages: int = 0  # rows written (= leases acked)
    distinct_ids: int = 0  # distinct message ids written by this run
    rounds: int = 0
    backlog: int | None = None  # last backlog the API reported
    seconds: float = 0.0
    pull_seconds: float = 0.0
    write_seconds: float = 0.0
    ack_seconds: float = 0.0
    extensions: int = 0
    conflicts: int = 0
    spark_startup_seconds: float = 0.0

    @property
    def messages_per_second(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "messages_per_second": round(self.messages_per_second, 1)}


# --- executors ---------------------------------------------------------------------------------------------


def _pull_task(
    api: ApiConfig,
    queue: str,
    group: str,
    quota: int,
    batch_size: int,
    vis_ms: int,
    wait_ms: int,
    round_seconds: float,
    run_id: str,
    round_no: int,
) -> Any:
    """The function each puller task runs: yields ("meta", ...) once, then (row, lease_id) pairs."""

    def task(index: int, _rows: Any) -> Any:
        from sluice.client import SluiceApiError

        client = api.client()
        taken: list[tuple[tuple[Any, ...], str]] = []
        backlog: int | None = None
        drained = False  # the last pull proved the group drained (an exact answer: every shard read)
        first_pull_ms: int | None = None
        conflicts = 0
        deadline = time.monotonic() + round_seconds  # from the task's start: tasks may queue for a slot
        try:
            while len(taken) < quota and (backlog is None or time.monotonic() < deadline):
                pulled_at = int(time.time() * 1000)
                try:
                    result = client.pull(
                        queue,
                        batch_size=min(batch_size, quota - len(taken)),
                        visibility_timeout_ms=vis_ms,
                        wait_time_ms=wait_ms,
                        consumer_group=group,
                    )
                except SluiceApiError as exc:
                    if not backs_off(exc):
                        raise
                    conflicts += 1  # another puller committed this shard's state first, or a throttle
                    time.sleep(0.02 * min(conflicts, 10))
                    if conflicts > 200:
                        raise
                    continue
                backlog = result.backlog
                drained = result.drained
                if not result.messages:
                    break
                if first_pull_ms is None:
                    first_pull_ms = pulled_at
                for m in result.messages:
                    row = (
                        m.id,
                        body_text(m.body, m.content_type),
                        m.content_type,
                        m.attributes or {},
                        m.partition_key,
                        m.timestamp_ms,
                        m.attempts,
                        pulled_at,
                        run_id,
                        round_no,
                        ingest_date(m.timestamp_ms),
                    )
                    taken.append((row, m.lease_id))
        finally:
            client.close()
        yield ("meta", (index, len(taken), backlog, first_pull_ms, conflicts, drained))
        yield from taken

    return task


# --- driver ------------------------------------------------------------------------------------------------


def round_backlog(metas: list[tuple[Any, ...]]) -> tuple[bool, int | None]:
    """Whether a task's last pull proved the group drained, and the round's backlog: that proof's figure
    when there is one (the tasks' other last answers may be estimates taken before it, e.g. a pull that
    lost a race to a lane split), else the largest any task saw."""
    proofs = [m[2] for m in metas if m[5]]
    if proofs:
        return True, max(proofs)
    backlogs = [m[2] for m in metas if m[2] is not None]
    return False, max(backlogs) if backlogs else None


class LeaseKeeper:
    """Extends a round's leases before they expire, until the round is acked (or abandoned)."""

    def __init__(self, client: Any, queue: str, leases: list[str], vis_ms: int, expires_ms: int) -> None:
        self.client, self.queue, self.leases, self.vis_ms = client, queue, leases, vis_ms
        self.expires_ms = expires_ms
        self.margin_ms = max(1000, min(vis_ms // 3, 30_000))
        self.extensions = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            now = int(time.time() * 1000)
            if now < self.expires_ms - self.margin_ms:
                continue
            try:
                for chunk in _chunks(self.leases, LEASES_PER_CALL):
                    call_with_conflict_retry(self.client.extend, self.queue, chunk, self.vis_ms)
                self.expires_ms = now + self.vis_ms
                self.extensions += 1
                LOG.info("extended %d leases by %d ms (write still running)", len(self.leases), self.vis_ms)
            except Exception:  # a failed extension only risks a duplicate, never a loss
                LOG.warning("lease extension failed; will retry", exc_info=True)


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _ack(client: Any, queue: str, leases: list[str], threads: int = 4) -> int:
    def one(chunk: list[str]) -> int:
        result = call_with_conflict_retry(client.ack, queue, chunk)
        for warning in result.get("warnings") or []:
            LOG.warning("ack warning: %s", warning)
        return result["ackCount"]

    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(one, _chunks(leases, LEASES_PER_CALL)))


def pin(rdd: Any) -> Any:
    """Never run the pull twice: keep its output on the executors and cut the lineage once the first
    action has computed it, so a lost block fails the job rather than pulling other messages than the
    ones whose leases the driver holds."""
    from pyspark import StorageLevel

    rdd.persist(StorageLevel.MEMORY_AND_DISK)  # also makes later maps start a new stage from the cache
    rdd.localCheckpoint()
    return rdd


def run(spark: Any, args: PullArgs, *, spark_startup_seconds: float = 0.0) -> Summary:
    """Drain the queue in rounds (pull on executors → Parquet commit → ack). Returns the run summary."""
    api = ApiConfig(
        url=args.url,
        token=resolve_token(args.token, args.token_secret_arn, args.region),
        auth=args.auth,
        region=args.region,
    )
    if api.auth != "iam" and not api.token:
        raise SystemExit("the secret behind --token-secret-arn holds no token")
    sc = spark.sparkContext
    n_tasks = args.parallelism or sc.defaultParallelism
    vis_ms = args.visibility_timeout_ms or int(
        (args.round_seconds + args.expected_write_seconds) * 1000 + 10_000
    )
    if vis_ms < args.round_seconds * 1000:
        LOG.warning("visibility timeout %d ms is shorter than a round; the lease keeper will extend", vis_ms)
    queue, group = args.queue, args.consumer_group
    client = api.client()
    summary = Summary(queue=queue, output=args.output, run_id=uuid.uuid4().hex[:12])
    summary.spark_startup_seconds = spark_startup_seconds
    seen: set[str] = set()
    started = time.monotonic()
    idle_since: float | None = None
    crash_round = int(os.environ.get(CRASH_ENV, "0"))
    LOG.info(
        "pulling %r (group %r) with %d tasks, rounds of %d messages, visibility %d ms, into %s",
        queue, group, n_tasks, args.round_messages, vis_ms, args.output,
    )  # fmt: skip
    try:
        while True:
            elapsed = time.monotonic() - started
            want = args.round_messages
            if args.max_messages:
                want = min(want, args.max_messages - summary.messages)
            if want <= 0 or (args.max_seconds and elapsed >= args.max_seconds):
                break
            round_no = summary.rounds + 1
            round_seconds = args.round_seconds
            if args.max_seconds:
                round_seconds = max(1.0, min(round_seconds, args.max_seconds - elapsed))
            quota = math.ceil(want / n_tasks)
            t0 = time.monotonic()
            pulled = sc.parallelize(range(n_tasks), n_tasks).mapPartitionsWithIndex(
                _pull_task(
                    api, queue, group, quota, args.batch_size, vis_ms, args.wait_time_ms,
                    round_seconds, summary.run_id, round_no,
                )
            )  # fmt: skip
            pin(pulled)
            handles = pulled.map(lambda e: e if e[0] == "meta" else (e[0][0], e[1])).collect()
            metas = [h[1] for h in handles if h[0] == "meta"]
            pairs = [h for h in handles if h[0] != "meta"]
            leases = [lease for _, lease in pairs]
            summary.pull_seconds += time.monotonic() - t0
            summary.conflicts += sum(m[4] for m in metas)
            drained, backlog = round_backlog(metas)
            if backlog is not None:
                summary.backlog = backlog
            if not pairs:
                pulled.unpersist()
                if drained:
                    break  # drained: an exact answer (every shard read), nothing available or in flight
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since >= args.idle_timeout_seconds:
                    LOG.info("nothing to pull for %.0f s while %s in flight elsewhere; stopping",
                             args.idle_timeout_seconds, summary.backlog)  # fmt: skip
                    break
                time.sleep(1.0)
                continue
            idle_since = None
            first_ms = min(m[3] for m in metas if m[3] is not None)
            with LeaseKeeper(client, queue, leases, vis_ms, first_ms + vis_ms) as keeper:
                t1 = time.monotonic()
                rows = pulled.filter(lambda e: e[0] != "meta").map(lambda e: e[0])
                frame = spark.createDataFrame(rows, PULL_OUTPUT_SCHEMA)
                (
                    frame.write.mode("append")
                    .partitionBy("ingest_date")
                    .option("compression", args.compression)
                    .parquet(args.output)
                )
                summary.write_seconds += time.monotonic() - t1
                if round_no == crash_round:
                    LOG.warning("fault injection: killing the driver after round %d's write", round_no)
                    os.kill(os.getpid(), signal.SIGKILL)
                t2 = time.monotonic()
                acked = _ack(client, queue, leases)
                summary.ack_seconds += time.monotonic() - t2
            summary.extensions += keeper.extensions
            pulled.unpersist()
            summary.rounds = round_no
            summary.messages += len(pairs)
            seen.update(mid for mid, _ in pairs)
            LOG.info(
                "round %d: %d messages pulled, written and acked (%d acks) in %.1f s; %d total, %.0f msg/s",
                round_no, len(pairs), acked, time.monotonic() - t0, summary.messages,
                summary.messages / (time.monotonic() - started),
            )  # fmt: skip
    finally:
        client.close()
    summary.distinct_ids = len(seen)
    summary.seconds = time.monotonic() - started + spark_startup_seconds
    return summary


def main(argv: list[str] | None = None) -> Summary:
    configure_logging()
    t0 = time.monotonic()
    try:
        args = parse_args(PullArgs, sys.argv[1:] if argv is None else argv)
    except ArgumentError as exc:
        raise SystemExit(f"pull_consumer: {exc}") from None
    spark, glue = spark_session("sluice-pull-consumer", args.master)
    startup = time.monotonic() - t0
    job = None
    if glue is not None:
        from awsglue.job import Job

        job = Job(glue)
        job.init(args.job_name, {"JOB_NAME": args.job_name})  # bookmarks are off: nothing else is read
    summary = run(spark, args, spark_startup_seconds=startup)
    report = summary.as_dict()
    report["spark_startup_share"] = round(startup / summary.seconds, 3) if summary.seconds else 0.0
    if args.verify_output and summary.messages:
        from pyspark.sql import functions as F

        counts = spark.read.parquet(args.output).agg(F.count("*"), F.countDistinct("id")).first()
        report["output_rows"], report["output_distinct_ids"] = int(counts[0]), int(counts[1])
    LOG.info("summary: %s", json.dumps(report))
    if args.summary_path:
        with open(args.summary_path, "w") as fh:
            json.dump(report, fh)
    if job is not None:
        job.commit()
    return summary


if __name__ == "__main__":
    main()
