"""`make demo`: the local runtime on embedded moto, one queue, concurrent producers and consumers.

Prints a summary: sent, received, duplicates, backlog, and msg/s for sending and for pull+ack.
"""

from __future__ import annotations

import argparse
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from tqdm import tqdm

from sluice.client import SluiceClient
from sluice.local.runtime import LocalRuntime


def run(messages: int, producers: int, consumers: int, batch_size: int) -> dict[str, float]:
    token = "demo-" + secrets.token_hex(8)
    runtime = LocalRuntime(port=0, admin_token=token)
    print("starting sluice local (embedded moto) ...", flush=True)
    runtime.start()
    client = SluiceClient(runtime.url, token)
    try:
        queue = "demo"
        client.create_queue(queue, visibility_timeout_ms=30_000)
        print(f"sluice local ready on {runtime.url}; queue {queue!r} created", flush=True)

        batches = [
            [{"body": {"n": n, "payload": "x" * 150}} for n in range(start, min(messages, start + 100))]
            for start in range(0, messages, 100)
        ]
        started = time.perf_counter()
        with tqdm(total=messages, unit="msg", desc="send") as bar, ThreadPoolExecutor(producers) as pool:
            for result in pool.map(lambda batch: client.send_batch(queue, batch), batches):
                bar.update(len(result["message_ids"]))
        send_seconds = time.perf_counter() - started

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
    finally:
        client.close()
        runtime.stop()
    print(
        "\nsummary: sent={sent} received={received} duplicates={duplicates} backlog={backlog} "
        "send={send_msg_per_s:.0f} msg/s pull+ack={pull_ack_msg_per_s:.0f} msg/s".format(**summary)
    )
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=50)
    args = parser.parse_args()
    summary = run(args.messages, args.producers, args.consumers, args.batch_size)
    ok = summary["received"] == summary["sent"] and summary["duplicates"] == 0 and summary["backlog"] == 0
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
