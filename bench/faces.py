"""The SQS face against the native face on one `sluice local`, the same batch: `python -m bench.faces`
measures, prints, and replaces its section of docs/performance.md; `python -m bench` runs it inside its
local end-to-end section."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

FACE_BATCH = 10  # SQS's largest batch: both faces move the same 10 messages per call


def measure_faces(url: str, client: Any, bodies: list[str], rounds: int = 5, per_round: int = 200) -> dict:
    """The native face and the SQS face on one `sluice local`, the same batch (10) and bodies: a round of
    each in turn, the order swapped every other round (so load from elsewhere on the machine falls on
    both alike), the median of `rounds`.
    Send: `send_batch` / `SendMessageBatch`; consume: `pull` + `ack` / `ReceiveMessage` +
    `DeleteMessageBatch`, one client thread each."""
    import boto3
    from botocore.config import Config

    token = client.create_token("*", ["admin"])
    key = client.issue_access_key(token["token_id"])
    sqs = boto3.client(
        "sqs",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key["access_key_id"],
        aws_secret_access_key=key["secret_access_key"],
        config=Config(retries={"max_attempts": 3}),
    )
    native_q = f"face-{os.urandom(3).hex()}"
    client.create_queue(native_q)
    sqs_url = sqs.create_queue(QueueName=f"face-{os.urandom(3).hex()}")["QueueUrl"]
    batches = per_round // FACE_BATCH
    rates: dict[str, list[float]] = {
        "native_send": [],
        "native_consume": [],
        "sqs_send": [],
        "sqs_consume": [],
    }

    def timed(key: str, work: Callable[[], int]) -> None:
        t0 = time.perf_counter()
        moved = work()
        rates[key].append(moved / (time.perf_counter() - t0))

    def native_send() -> int:
        for _ in range(batches):
            client.send_batch(native_q, [{"body": b, "content_type": "text"} for b in bodies])
        return per_round

    def native_consume() -> int:
        got = 0
        while got < per_round:
            res = client.pull(native_q, batch_size=FACE_BATCH)
            client.ack(native_q, [m.lease_id for m in res.messages])
            got += len(res.messages)
        return got

    def sqs_send() -> int:
        for _ in range(batches):
            entries = [{"Id": str(k), "MessageBody": b} for k, b in enumerate(bodies)]
            sqs.send_message_batch(QueueUrl=sqs_url, Entries=entries)
        return per_round

    def sqs_consume() -> int:
        got = 0
        while got < per_round:
            msgs = sqs.receive_message(QueueUrl=sqs_url, MaxNumberOfMessages=FACE_BATCH).get("Messages", [])
            if msgs:
                entries = [{"Id": str(k), "ReceiptHandle": m["ReceiptHandle"]} for k, m in enumerate(msgs)]
                sqs.delete_message_batch(QueueUrl=sqs_url, Entries=entries)
            got += len(msgs)
        return got

    for index in range(rounds):
        pairs = [("native_send", native_send), ("sqs_send", sqs_send)]
        pairs += [("native_consume", native_consume), ("sqs_consume", sqs_consume)]
        if index % 2:  # every other round the SQS face goes first: whatever favours going first cancels
            pairs = [pairs[1], pairs[0], pairs[3], pairs[2]]
        for key, work in pairs:
            timed(key, work)
    return {k: sorted(v)[len(v) // 2] for k, v in rates.items()} | {"rounds": rounds, "per_round": per_round}


TITLE = "The SQS face against the native face (same batch)"


def render(faces: dict, level: str = "##") -> list[str]:
    return [
        f"{level} {TITLE}",
        "",
        f"Batches of 10 messages of 200 B on one `sluice local`, one client thread: the native SDK "
        f"(`send_batch`, `pull` + `ack`) and boto3 on the SQS face (`SendMessageBatch`, `ReceiveMessage` + "
        f"`DeleteMessageBatch`), rounds of {faces['per_round']} messages of each in turn (the order swapped "
        f"every other round), median of {faces['rounds']} rounds (`python -m bench.faces`).",
        "",
        "| path | native msg/s | SQS face msg/s | SQS / native |",
        "|---|---:|---:|---:|",
        f"| send | {faces['native_send']:.0f} | {faces['sqs_send']:.0f} | "
        f"{faces['sqs_send'] / faces['native_send']:.2f} |",
        f"| consume (receive + delete) | {faces['native_consume']:.0f} | {faces['sqs_consume']:.0f} | "
        f"{faces['sqs_consume'] / faces['native_consume']:.2f} |",
        "",
    ]


def main() -> None:
    from bench import coldstart
    from bench.measure import TOKEN, setup_aws_env
    from bench.payloads import RANDOM_200

    setup_aws_env()
    from sluice.client import SluiceClient
    from sluice.local.runtime import LocalRuntime, free_port

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    runtime = LocalRuntime(port=free_port(), admin_token=TOKEN)
    runtime.start()
    try:
        client = SluiceClient(runtime.url, TOKEN)
        bodies = [b for b, _ in RANDOM_200.bodies(FACE_BATCH, seed=3)]
        result = measure_faces(runtime.url, client, bodies, rounds=rounds)
        client.close()
    finally:
        runtime.stop()
    print(json.dumps(result, indent=2))
    doc = ROOT / "docs" / "performance.md"
    text = doc.read_text() if doc.exists() else ""
    doc.write_text(coldstart.replace_section(text, render(result), f"## {TITLE}"))
    print(f"wrote the section {TITLE!r} of docs/performance.md")


if __name__ == "__main__":
    main()
