"""What push delivery costs per message: the push worker (`Pusher.run`, as the consumer function runs it)
on moto, delivering a backlog in batches to an in-process target, with every DynamoDB call priced by
bench/accounting.py (item sizes probed). `python -m bench.push` prints the table and writes its section
of docs/performance.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TITLE = "Push delivery: units per message"
PUSH_START, PUSH_END = "<!-- push:start -->", "<!-- push:end -->"  # kept by `make bench` (bench/run.py)
BATCHES = (10, 100)
BATCHES_DELIVERED = 10


def measure() -> list[dict[str, Any]]:
    from bench.measure import setup_aws_env

    setup_aws_env()
    from moto import mock_aws

    from sluice.local.provision import provision
    from sluice.service import Sluice
    from sluice.settings import get_settings

    with mock_aws():
        settings = provision(None, "bench")
        os.environ.update(settings.to_env())
        get_settings.cache_clear()
        engine = Sluice.from_settings(settings)
        return [deliver(engine, batch) for batch in BATCHES]


def deliver(engine: Any, batch: int) -> dict[str, Any]:
    """BATCHES_DELIVERED batches of `batch` pushed by one worker; its DynamoDB units and calls."""
    import boto3

    from bench.accounting import Accountant
    from sluice.engine.push.config import PushConsumer
    from sluice.models import OutgoingMessage

    queue, total = f"push-{batch}", BATCHES_DELIVERED * batch
    engine.queues.create(queue)
    for start in range(0, total, 100):
        engine.publisher.publish(
            queue, [OutgoingMessage(body=b'{"n": %d}' % n) for n in range(start, start + 100)]
        )
    hook = PushConsumer(
        id="hook", type="webhook", url="https://example.com/h", max_batch_size=batch, max_batch_timeout_ms=0
    )
    engine.pusher.configs.create(engine.queues.get(queue), hook)
    payloads: list[dict[str, Any]] = []

    def target_for(_consumer: PushConsumer) -> Callable[[dict[str, Any]], None]:
        return payloads.append

    accountant = Accountant(boto3.client("dynamodb", region_name="us-east-1")).start()
    report = engine.pusher.run(queue, hook.id, 0, target_for, lambda: 600_000)
    tally = accountant.reset()
    accountant.stop()
    assert report.delivered == sum(len(p["messages"]) for p in payloads) == total, report
    calls = sum(n for (service, _op), n in tally.calls.items() if service == "dynamodb")
    return {
        "batch": batch,
        "messages": total,
        "wcu_per_msg": tally.wcu / total,
        "rcu_per_msg": tally.rcu / total,
        "calls_per_msg": calls / total,
        "calls": {f"{service} {op}": n for (service, op), n in sorted(tally.calls.items())},
    }


def render(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        PUSH_START,
        f"## {TITLE}",
        "",
        f"A push worker (`sluice/engine/push/worker.py`) delivering {BATCHES_DELIVERED} batches to a target",
        "that takes them, on moto (`python -m bench.push`): DynamoDB write and read units and calls per",
        "message delivered, the worker's slot, pulls and acks included. A delivered batch's acks ride on the",
        "worker's next pull (one state write for both); the last batch's on the pull that finds the backlog",
        "empty.",
        "",
        "| batch | messages | WRU/msg | RRU/msg | DynamoDB calls/msg |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['batch']} | {r['messages']:,} | {r['wcu_per_msg']:.4f} | {r['rcu_per_msg']:.4f} "
            f"| {r['calls_per_msg']:.3f} |"
        )
    return [*lines, "", PUSH_END]


def main() -> None:
    from bench.report import replace_section

    section = "\n".join(render(measure()))
    print(section)
    replace_section(ROOT / "docs" / "performance.md", section, PUSH_START, PUSH_END)
    print(f"wrote the section {TITLE!r} of docs/performance.md")


if __name__ == "__main__":
    main()
