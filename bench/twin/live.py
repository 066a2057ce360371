"""A live stream in the twin (issue 22): producers send while long-polling pullers pull and ack, so the
backlog stays near empty, the state most queues live in. The pullers tables of `bench.twin.consume`
measure pullers against a seeded backlog, where the lanes split; here every shard holds only what
arrived since the last pulls, and whether its pullers still race on one item per shard is the question.

`python -m bench.twin.live` measures the rows and writes its own section of docs/performance.md (between
LIVE_START and LIVE_END); `--quick` runs a smoke version that writes nothing. Every row drains after its
window and reports the messages never acked and the acks of a message acked before (both must be 0).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench.twin.consume import PACED_WARMUP_S, THINK_S
from bench.twin.scenarios import pull_load

OUT_NAME = "twin-live.json"
LIVE_START = "<!-- twin-live:start -->"
LIVE_END = "<!-- twin-live:end -->"
WAIT_MS = 1_000  # the long-poll of `SluiceClient.iterate`
# (pullers, msg/s sent, acks carried on the next pull): 3 pullers a shard; pullers sized to the rate (a
# paced puller takes ~380 msg/s); the 1,000 pullers, over-provisioned; the first two again with
# acks on the next pull, as `SluiceClient.iterate` acks. 32 shards take ~100,000 msg/s of 200-byte
# sends at the coordinator's 70 % target (each shard's partition: 1,000 write units a second).
ROWS = (
    (100, 30_000, False),
    (300, 100_000, False),
    (100, 30_000, True),
    (300, 100_000, True),
    (1_000, 100_000, False),
)
QUICK_ROWS = ((10, 2_000, False),)


def measure(quick: bool, save: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    """Measure the rows, saving after each one: the 1,000-puller row alone takes 18-55 min here, most of
    it in its drain (docs/performance.md "Stop 61")."""
    started = time.time()
    rows = []
    for pullers, rate, carry in QUICK_ROWS if quick else ROWS:
        rows.append(
            pull_load(
                pullers,
                100,
                shards=4 if quick else 32,
                seconds=0.5 if quick else 1.0,
                backlog=0,
                warmup=0.3 if quick else PACED_WARMUP_S,
                think_s=THINK_S,
                publish_rate=rate,
                wait_ms=WAIT_MS,
                carry_acks=carry,
            )
        )
        print(rows[-1], flush=True)
        save({"rows": rows, "wall_s": time.time() - started})
    return {"rows": rows, "wall_s": time.time() - started}


def report(result: dict[str, Any]) -> str:
    lines = [
        LIVE_START,
        "### A live stream: producers and pullers at once (one group, 32 shards)",
        "",
        "Producers send batches of 100 (200-byte bodies) at the rate shown while each puller long-polls "
        f"({WAIT_MS:,} ms, as `SluiceClient.iterate`), works {THINK_S} s on what it got and acks it (an "
        "ack call, or on its next pull as `iterate` does); "
        f"{PACED_WARMUP_S} s of warm-up, then 1 s measured (virtual time). No seeded "
        "backlog: a shard holds what arrived since its last pulls. Lost races: failed conditional writes "
        "of lane items over all lane writes. Units per message are the pullers' (the sends' are not "
        "counted). After the window the producers stop and the pullers drain until each gets an exact "
        "empty answer: unacked at rest and acked twice must be 0. Executions (peak): the most Lambda "
        "executions at once in the window, pullers' and producers' (a long-poll holds one for its whole "
        "wait, and every call for its handler CPU too, `bench/twin/lambdas.py`; the twin refuses one past "
        "Lambda's default quota of 1,000 per account and Region). Delivery: from a send call's start to "
        "the first lease of its messages, over the messages sent in the window (a pull's own latency "
        "also counts its long-poll's wait for messages not sent yet). Consume "
        "$/M: per million messages acked, the pullers' capacity units, invocations, HTTP API requests and "
        "billed duration (SQS: receive and delete in batches of 10, $0.08).",
        "",
        "| pullers | acks | sent msg/s | acked msg/s | mean batch | empty pulls | lost races "
        "| throttled calls | WRU/msg | RRU/msg | pull p50 ms | pull p99 ms | delivery p50 / p99 ms "
        "| pulls refused | lanes (max) | unacked at rest | acked twice | executions (peak) | consume $/M |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        refused = sum(r["failed_calls"].values())
        acks = "next pull" if r["carry_acks"] else "ack call"
        lines.append(
            f"| {r['pullers']:,} | {acks} | {r['sent_per_s']:,.0f} | {r['msgs_per_s']:,.0f} "
            f"| {r['mean_batch']:.0f} | {100 * r['empty_share']:.0f} % | {100 * r['conflict_share']:.1f} % "
            f"| {100 * r['throttle_share']:.1f} % | {r['wcu_per_msg']:.4f} | {r['rcu_per_msg']:.3f} "
            f"| {r['pull_p50_ms']:.0f} | {r['pull_p99_ms']:.0f} | {_delivery(r)} "
            f"| {100 * refused / max(1, refused + r['pulls']):.1f} % | {r['lanes']} "
            f"| {r['unacked_at_rest']:,} | {r['acked_again']:,} | {r.get('peak_executions_total', 0):,} "
            f"| {r.get('consume_usd_per_m', 0):.3f} |"
        )
    lines += ["", f"Wall time on this machine: {result['wall_s']:.0f} s.", LIVE_END]
    return "\n".join(lines)


def _delivery(row: dict[str, Any]) -> str:
    if "delivery_p50_ms" not in row:
        return "not measured"  # saved before the twin measured it
    return f"{row['delivery_p50_ms']:.0f} / {row['delivery_p99_ms']:.0f}"


def main(argv: list[str] | None = None) -> None:
    from bench.twin.__main__ import section_cli

    section_cli("python -m bench.twin.live", OUT_NAME, measure, report, (LIVE_START, LIVE_END), argv)


if __name__ == "__main__":
    main()
