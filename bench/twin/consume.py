"""The consume plane in the twin (issue 22): what an exact empty answer costs on an idle queue, pullers
against a seeded backlog (throughput, lost races, write units per message). The drain scenario has its
own section (`python -m bench.twin.drain`).

`python -m bench.twin.consume` measures both and writes its own section of docs/performance.md
(between CONSUME_START and CONSUME_END); `--quick` runs a smoke version that writes nothing.
"""

from __future__ import annotations

import time
from typing import Any

from bench.prices import LAMBDA_MEMORY_MB, RRU_PRICE, Usage, billed_gb_seconds, on_demand_per_million
from bench.twin.scenarios import pull_load
from bench.twin.world import build
from sluice.engine.tierpolicy import MONTH_SECONDS
from sluice.models import OutgoingMessage

OUT_NAME = "twin-consume.json"

CONSUME_START = "<!-- twin-consume:start -->"
CONSUME_END = "<!-- twin-consume:end -->"
IDLE_SHARDS = (1, 32, 128)
LONG_POLL_MS = 20_000
# 1,000 closed-loop pullers at batch 100 take over 2,500,000 messages/s: a 400,000 backlog, and
# later one of 1,200,000, ran out inside the 0.8 s window, so the row measured lanes running dry (more
# lost races, a longer p99), not pullers against a backlog. Seeding is cheap (~15 s a million); a
# row that leaves less than LASTING of its backlog is measured again on twice as much.
BACKLOG_CAP = 2_000_000  # 4x the 500,000 msg/s the front door's quotas let through at batch 100
LASTING = 0.2
THINK_S = 0.25  # a paced puller's work per batch of 100: 1,000 of them ask for ~370,000 msg/s
PACED_WARMUP_S = 2.0
VARIANTS = ((THINK_S, False), (0.0, True), (THINK_S, True))  # (work per batch s, acks carried on the pull)
FOUND_AFTER_S = 2.0  # the "found" long-poll: a message is sent this long into the wait
SMALL_CONSUMER_MB = 256  # the idle table's last column: the stack's `consumer_memory_mb=256`


def idle_poll_cost(shards: int) -> dict[str, Any]:
    """Read units and calls of one empty wait-0 pull, and of one 20 s long-poll, on an idle queue (by a
    container whose earlier pull came back empty: its first one samples 8 shards before the survey);
    then of a long-poll that finds a message sent `FOUND_AFTER_S` into its wait (the read units only:
    the calls would count the send's)."""
    world = build()
    engine = world.engine
    engine.queues.create("idle", {"min_shards": shards, "max_shards": shards})
    world.sim.now = 1.0
    stats = world.dynamo.stats
    out: dict[str, Any] = {"shards": shards}

    def send_later() -> None:
        world.sim.sleep(FOUND_AFTER_S)
        world.container().publisher.publish("idle", [OutgoingMessage(body=b'{"found": 1}')])

    def container() -> None:  # one actor: the planner's memory of the last answer is per container
        for name, wait_ms in (("first", 0), ("empty", 0), ("long", LONG_POLL_MS)):
            stats.reset()
            started = world.sim.now
            result = engine.consumer.pull("idle", group="default", batch_size=10, wait_ms=wait_ms)
            assert not result.messages and result.backlog_exact
            out[name] = {
                "rru": stats.rcu,
                "wru": stats.wcu,
                "calls": sum(stats.attempts.values()),
                "usd": stats.rcu * RRU_PRICE,
                "seconds": world.sim.now - started,  # the consumer function's duration (virtual time)
            }
        stats.reset()
        world.sim.spawn("sender", send_later)
        result = engine.consumer.pull("idle", group="default", batch_size=10, wait_ms=LONG_POLL_MS)
        assert len(result.messages) == 1
        out["found"] = {"rru": stats.rcu, "usd": stats.rcu * RRU_PRICE}

    world.sim.spawn("container", container)
    world.sim.run_until(world.sim.now + 2 * LONG_POLL_MS / 1000 + 10)
    return out


def pullers(quick: bool) -> list[dict[str, Any]]:
    """Closed-loop pull+ack pullers of one group on 32 shards: a 0.3 s warm-up (the lanes widen), then
    0.5 virtual seconds measured, against a backlog that lasts through both. 1,000 pullers ask for more
    than API Gateway's 10,000 requests a second: they warm up for 1 s and are measured for 1 s, so the
    gateway's burst (5,000 requests, half a second at that rate) is spent before the window."""
    counts = (10, 100) if quick else (10, 100, 1000)
    rows = []
    for batch in (10, 100):
        for n in counts:
            seconds, warmup = (1.0, 1.0) if n >= 1000 else (0.5, 0.3)
            rows.append(lasting(n, batch, shards=32, seconds=seconds, warmup=warmup))
            print(rows[-1], flush=True)
    return rows


def lasting(pullers: int, batch: int, **scenario: Any) -> dict[str, Any]:
    """`pull_load` on a backlog that outlasts its window: pullers x batch x 60 messages (20,000 to
    BACKLOG_CAP), doubled while a run leaves less than LASTING of it (up to 4 x BACKLOG_CAP)."""
    backlog = int(min(BACKLOG_CAP, max(20_000, pullers * batch * 60)))
    while True:
        row = pull_load(pullers, batch, backlog=backlog, **scenario)
        if row["left_share"] >= LASTING or backlog >= 4 * BACKLOG_CAP:
            return row
        print(f"ran dry: {row}; again on {2 * backlog:,}", flush=True)
        backlog *= 2


def variants(quick: bool) -> list[dict[str, Any]]:
    """1,000 pullers at batch 100 as consumers run: working on each batch (`THINK_S`, the rate the
    issue's targets name) and acking on the next pull (as `SluiceClient.iterate` does)."""
    n = 10 if quick else 1000
    rows = []
    for think, carry in VARIANTS:
        # A paced puller makes ~4 rounds a second: a longer window, and a longer warm-up (lanes widen
        # on lost races; in 0.3 s the pullers made ~1 round, and 14-18 % of lane writes failed, on
        # the lane 0 of shards not split yet).
        seconds, warmup = (1.0, PACED_WARMUP_S) if think else (1.0, 1.0) if n >= 1000 else (0.5, 0.3)
        run = lasting(n, 100, shards=32, seconds=seconds, warmup=warmup, think_s=think, carry_acks=carry)
        rows.append(run)
        print(rows[-1], flush=True)
    return rows


def measure(quick: bool) -> dict[str, Any]:
    started = time.time()
    idle = [idle_poll_cost(s) for s in (IDLE_SHARDS[:2] if quick else IDLE_SHARDS)]
    rows = pullers(quick)
    out: dict[str, Any] = {"idle": idle, "pullers": rows, "variants": variants(quick)}
    out["wall_s"] = time.time() - started
    return out


def report(result: dict[str, Any]) -> str:
    lines = [CONSUME_START, "## Consume: exact emptiness and lanes (twin)", ""]
    lines += [
        "### The cost of an exact empty answer (idle queue, one group, strongly consistent reads)",
        "",
        "An empty answer reads every shard: HEAD + the group's lane 0 (one lane per shard at rest; split",
        "lanes are merged back by the first empty survey). A long-poll makes that survey when it starts",
        "and again right before it answers empty; in between, every 50, 100, 200, then 250 ms",
        "(`LONG_POLL_MAX_INTERVAL`; past 32 shards 250 ms x shards/32), it reads only the HEADs and the",
        "lanes holding leases in flight, eventually consistent (0.5 RRU each: `sluice/engine/longpoll.py`),",
        "and surveys again, strongly consistent, the shards where something moved: a send moves a HEAD's",
        "`next`, a purge its floor, a pause or a map change its map stamp (every shard then), a retry by",
        "another consumer its lane's version; a lease or delay is surveyed when it comes due. Figures after",
        "one earlier empty pull of the container (its first pull looks at 8 sampled shards before the",
        f"survey: 16 RRU more). Found: a long-poll whose message is sent {FOUND_AFTER_S:.0f} s into the wait",
        "(the shard it landed on is surveyed alone). $ per pull: its read units; *Lambda + API*: the",
        f"consumer function's invocation, its duration at {LAMBDA_MEMORY_MB} MB (a long-poll waits inside",
        "it: billed for the whole wait) and the HTTP API request. $/month: one consumer long-polling the",
        "idle queue around the clock, read units alone and all of it, and all of it with the consumer",
        f"function deployed at {SMALL_CONSUMER_MB} MB (`-c consumer_memory_mb={SMALL_CONSUMER_MB}`)",
        "(SQS: $0.40 per million receives, ~$0.05 a month for one long-polling consumer, whose 20 s wait",
        "is not billed by the second).",
        "",
        "| shards | empty pull: RRU | calls | 20 s idle long-poll: RRU | calls | $ per empty pull "
        "| $ per idle long-poll | Lambda + API per long-poll | found: RRU | $/month idle: reads "
        f"| $/month idle: all | $/month idle: all, consumer at {SMALL_CONSUMER_MB} MB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["idle"]:
        e, lp = r["empty"], r["long"]
        polls = MONTH_SECONDS / (LONG_POLL_MS / 1000)
        seconds = lp.get("seconds", LONG_POLL_MS / 1000)
        function, small = _invocation_usd(seconds), _invocation_usd(seconds, SMALL_CONSUMER_MB)
        found = f"{r['found']['rru']:,.0f}" if "found" in r else "n/a"  # (saved before it was measured)
        lines.append(
            f"| {r['shards']} | {e['rru']:,.0f} | {e['calls']} | {lp['rru']:,.0f} | {lp['calls']} "
            f"| {e['usd']:.7f} | {lp['usd']:.5f} | {function:.5f} | {found} | {lp['usd'] * polls:.2f} "
            f"| {(lp['usd'] + function) * polls:.2f} | {(lp['usd'] + small) * polls:.2f} |"
        )
    lines += [
        "",
        "### Pullers against a backlog (one group, 32 shards)",
        "",
        "0.3 virtual seconds of warm-up (lanes widen on lost races), then 0.5 s measured (1,000 pullers:",
        "1 s and 1 s, past API Gateway's burst, below), each puller in",
        "its own container (its own engine, as one Lambda container serves one request at a time),",
        f"against a backlog of pullers x batch x 60 messages (20,000 to {BACKLOG_CAP:,}), doubled",
        f"while a run leaves less than {100 * LASTING:.0f} % of it: a row that ran dry",
        "measured the lanes' tail, not pullers against a backlog (left: the share not acked at the end).",
        "Pulls refused: answered 429 (by API Gateway past its quota, below, or by the engine when every",
        "partition a pull needed was saturated), 503, or the gateway's 500 for an invocation Lambda",
        "refused, which the pull latencies do not count (the puller comes back as the SDK does: after the",
        "engine's Retry-After, 1 s for a 429 and 2 s for a 503, and after 100-200 ms for the gateway's;",
        "a refused ack is sent again as the SDK sends it). The front door is AWS's at its default quotas:",
        "API Gateway's 10,000 requests a second per account and Region with a bucket of 5,000 (each route's",
        "throttle set to the same, `-c api_throttle_rate=10000 -c api_throttle_burst=5000`;",
        "`bench/twin/gateway.py`), and Lambda's 1,000 concurrent executions, 10,000 invocations a second",
        "and 1,000 new environments per function every 10 s. Every pull and every ack call is one request:",
        "at batch 100 with ack calls 10,000 requests a second carry at most 500,000 msg/s, at batch 10",
        "50,000 (100,000 with acks on the next pull); beyond, the quotas must be raised (both adjustable).",
        "Conflicts: failed conditional writes of lane items over all lane writes; WRU/msg: every write unit",
        "of the window (pull commits, claims, ack ADDs, splits) per acked message. Before the lanes (one",
        "state item per shard and group, section (3) of the DynamoDB twin above): 1,000 pullers made 186,600",
        "msg/s at batch 100 and 22,560 at batch 10 with ~90 % of state writes losing the race. Targets",
        "(issue 22): 1,000 pullers ≥ 300,000 msg/s at batch 100 with < 5 % lost races and p99 ≤ 100 ms,",
        "≥ 100,000 at batch 10; 10 pullers < 1 %; ≤ 0.02 WRU/msg at batch 100. Earlier runs of this table",
        "(248,200-324,600 msg/s, 7-12 % lost races at 1,000 x 100) ran every puller through one shared",
        "engine, whose lost-race count is per process: one puller's lost race read as every concurrent",
        "puller's, so owners let go of their lanes and widened on others' races; and their 400,000-message",
        "backlog ran out inside the window.",
        "Executions (peak): the most consumer-function executions at once in the window (every pull and",
        "ack is one, for as long as its AWS calls and its handler CPU take, the CPU at Lambda's share of",
        f"a vCPU at {LAMBDA_MEMORY_MB} MB; `bench/twin/lambdas.py`). Consume $/M: per million",
        "messages acked, the pullers' capacity units, their invocations with their HTTP API requests, and",
        f"the invocations' duration at {LAMBDA_MEMORY_MB} MB (SQS: receive and delete in batches of 10,",
        "$0.08).",
        "",
        "| pullers | batch | pull+ack msg/s | conflicts | throttles | WRU/msg | RRU/msg | pull p50 ms "
        "| pull p99 ms | pulls refused | lanes (max/shard) | backlog | left | executions (peak) "
        "| consume $/M |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["pullers"]:
        lines.append(f"| {r['pullers']:,} | {r['batch']} | {_load_cells(r)} |")
    lines += [
        "",
        "#### 1,000 pullers at batch 100 as consumers run them",
        "",
        "The table above is closed-loop: each puller pulls again the moment its ack returns, so 1,000 of",
        "them ask for as much as the 32 shard partitions can give, and its p99 is the",
        "wait of the calls the partitions throttle. Here, same scenario: pullers that work on each batch",
        f"for {THINK_S:.2f} s before acking it (1,000 of them then ask for ~370,000 msg/s, above the issue's",
        "300,000), and pullers whose acks ride on their next pull (`acks=`, one lane write for both, as",
        "`SluiceClient.iterate` acks): with work, 2.0 s of warm-up and 1.0 s measured (in 0.3 s of",
        "warm-up a paced puller made about one round, too few lost races for the lanes to widen: 12-18 %",
        "of lane writes failed, almost all on the lane 0 of shards not split yet); without, 1 s and 1 s.",
        "",
        "| work per batch | acks | pull+ack msg/s | conflicts | throttles | WRU/msg | RRU/msg | pull p50 ms "
        "| pull p99 ms | pulls refused | lanes (max/shard) | backlog | left | executions (peak) "
        "| consume $/M |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result.get("variants", []):
        acks = "on the next pull" if r["carry_acks"] else "ack call"
        lines.append(f"| {r['think_s']:.2f} s | {acks} | {_load_cells(r)} |")
    lines += [
        "",
        f"Wall time on this machine: {result['wall_s']:.0f} s.",
        CONSUME_END,
    ]
    return "\n".join(lines)


def _invocation_usd(seconds: float, memory_mb: int = LAMBDA_MEMORY_MB) -> float:
    """One consumer invocation that lasted `seconds` at `memory_mb`, with its HTTP API request."""
    gb_seconds = billed_gb_seconds(seconds * 1000, 0, memory_mb=memory_mb)
    one = Usage(wru=0, rru=0, apigw_requests=1, invocations=1, gb_seconds=gb_seconds)
    return on_demand_per_million(one)["total"] / 1e6


def _load_cells(r: dict[str, Any]) -> str:
    """The cells both pullers tables share, from msg/s to the share of the backlog left. Pulls refused:
    answered with an error (429, 503), which the p99 (answered pulls) does not count."""
    refused = sum(r["failed_calls"].values())
    return (
        f"{r['msgs_per_s']:,.0f} | {100 * r['conflict_share']:.1f} % | {100 * r['throttle_share']:.1f} % "
        f"| {r['wcu_per_msg']:.4f} | {r['rcu_per_msg']:.3f} "
        f"| {r['pull_p50_ms']:.0f} | {r['pull_p99_ms']:.0f} "
        f"| {100 * refused / max(1, refused + r['pulls']):.1f} % | {r['lanes']} | {r['backlog']:,} "
        f"| {100 * r['left_share']:.0f} % | {r.get('peak_executions_total', 0):,} "
        f"| {r.get('consume_usd_per_m', 0):.3f}"
    )


def main(argv: list[str] | None = None) -> None:
    from bench.twin.__main__ import section_cli

    section_cli(
        "python -m bench.twin.consume",
        OUT_NAME,
        lambda quick, _save: measure(quick),
        report,
        (CONSUME_START, CONSUME_END),
        argv,
    )


if __name__ == "__main__":
    main()
