"""`make demo`: the local runtime on embedded moto, one queue, concurrent producers and consumers.

Prints a summary: sent, received, duplicates, backlog, and msg/s for sending and for pull+ack.
`--consumer spark` consumes with the Glue/EMR pull-consumer job (glue_jobs/pull_consumer.py, run as a
local Spark job in a subprocess, so this module never imports pyspark); without pyspark or Java it
falls back to the thread consumers. It prints the console's URL and token; `--serve` keeps the runtime
(and so the console) up after the summary until Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from tqdm import tqdm

from sluice.client import SluiceClient
from sluice.constants import CONSOLE_PATH
from sluice.local.runtime import LocalRuntime


def spark_available() -> bool:
    java = shutil.which("java") or os.environ.get("JAVA_HOME")
    return bool(java) and importlib.util.find_spec("pyspark") is not None


def consume_with_spark(url: str, token: str, queue: str, consumers: int) -> dict[str, float]:
    """Run the pull-consumer job as a local Spark job; its progress goes to stderr, its summary to JSON."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory(prefix="sluice-demo-") as tmp:
        summary_path = os.path.join(tmp, "summary.json")
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        cmd = [
            sys.executable, os.path.join(root, "glue_jobs", "pull_consumer.py"),
            "--master", f"local[{consumers}]", "--url", url, "--token", token, "--queue", queue,
            "--output", os.path.join(tmp, "out"), "--summary-path", summary_path, "--verify-output", "true",
        ]  # fmt: skip
        subprocess.run(cmd, env=env, check=True)
        with open(summary_path) as fh:
            return json.load(fh)


def run(
    messages: int,
    producers: int,
    consumers: int,
    batch_size: int,
    consumer: str = "threads",
    serve: bool = False,
) -> dict[str, float]:
    token = "demo-" + secrets.token_hex(8)
    runtime = LocalRuntime(port=0, admin_token=token)
    print("starting sluice local (embedded moto) ...", flush=True)
    runtime.start()
    client = SluiceClient(runtime.url, token)
    try:
        queue = "demo"
        client.create_queue(queue, visibility_timeout_ms=30_000)
        print(f"sluice local ready on {runtime.url}; queue {queue!r} created", flush=True)
        print(f"console (while the demo runs): {runtime.url}{CONSOLE_PATH}  token: {token}", flush=True)

        batches = [
            [{"body": {"n": n, "payload": "x" * 150}} for n in range(start, min(messages, start + 100))]
            for start in range(0, messages, 100)
        ]
        started = time.perf_counter()
        with tqdm(total=messages, unit="msg", desc="send") as bar, ThreadPoolExecutor(producers) as pool:
            for result in pool.map(lambda batch: client.send_batch(queue, batch), batches):
                bar.update(len(result["message_ids"]))
        send_seconds = time.perf_counter() - started

        if consumer == "spark":
            print("consuming with the Spark pull-consumer job (glue_jobs/pull_consumer.py) ...", flush=True)
            job = consume_with_spark(runtime.url, token, queue, consumers)
            summary = {
                "sent": messages,
                "received": job.get("output_distinct_ids", 0),
                "duplicates": job.get("output_rows", 0) - job.get("output_distinct_ids", 0),
                "backlog": client.pull(queue, batch_size=1).backlog,
                "send_msg_per_s": messages / send_seconds,
                "pull_ack_msg_per_s": job["messages_per_second"],
                "spark_startup_share": job["spark_startup_share"],
            }
            print(
                "\nsummary: sent={sent} received={received} duplicates={duplicates} backlog={backlog} "
                "send={send_msg_per_s:.0f} msg/s spark job={pull_ack_msg_per_s:.0f} msg/s "
                "(Spark start-up {spark_startup_share:.0%} of the job)".format(**summary)
            )
            return summary

        received: list[str] = []
        lock = threading.Lock()
        bar = tqdm(total=messages, unit="msg", desc="pull+ack")

        def consume() -> None:
            idle = 0
            while idle < 2:
                result = client.pull(queue, batch_size=batch_size, wait_time_ms=500)
                if not result.messages:
                    idle += 1
                    continue
                idle = 0
                client.ack(queue, [m.lease_id for m in result.messages])
                with lock:
                    received.extend(m.id for m in result.messages)
                    bar.update(len(result.messages))

        started = time.perf_counter()
        with ThreadPoolExecutor(consumers) as pool:
            for future in [pool.submit(consume) for _ in range(consumers)]:
                future.result()
        pull_seconds = time.perf_counter() - started
        bar.close()
        backlog = client.pull(queue, batch_size=1).backlog
        summary = {
            "sent": messages,
            "received": len(set(received)),
            "duplicates": len(received) - len(set(received)),
            "backlog": backlog,
            "send_msg_per_s": messages / send_seconds,
            "pull_ack_msg_per_s": len(received) / pull_seconds,
        }
        print(
            "\nsummary: sent={sent} received={received} duplicates={duplicates} backlog={backlog} "
            "send={send_msg_per_s:.0f} msg/s pull+ack={pull_ack_msg_per_s:.0f} msg/s".format(**summary)
        )
        if serve:
            print(f"serving the console at {runtime.url}{CONSOLE_PATH} until Ctrl-C", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                threading.Event().wait()
    finally:
        client.close()
        runtime.stop()
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument(
        "--consumer", choices=["threads", "spark"], default="threads", help="spark: the Glue/EMR job, locally"
    )
    parser.add_argument("--serve", action="store_true", help="keep the console up after the summary")
    args = parser.parse_args()
    consumer = args.consumer
    if consumer == "spark" and not spark_available():
        print("pyspark or Java not available: consuming with threads instead", flush=True)
        consumer = "threads"
    summary = run(args.messages, args.producers, args.consumers, args.batch_size, consumer, args.serve)
    ok = summary["received"] == summary["sent"] and summary["duplicates"] == 0 and summary["backlog"] == 0
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
