# ruff: noqa: E501  (report prose: long lines)
"""The control plane at scale on the twin (issue 23): SSM as AWS limits it (bench/twin/ssm.py), the
coordinator as a Lambda started by its minute rule and by brokers' wakes, every container with its own
cached map (bench/twin/scenarios.py).

- step: 1,000 -> 100,000 msg/s at t = 20 s (the step of docs/performance.md "DynamoDB twin" (2)), with
  the coordinator started by the minute rule and by brokers' wakes.
- ramp: 1,000 -> 200,000 msg/s over 36 s, then held.
- fleet: 1,200 broker containers (full scale) warmed over `WARM_S` (each reads the queue's document
  once, as its first request would: ≤ 30 reads a second), each request then served by any idle one;
  then the ramp to 200,000 msg/s. Every map change reaches every container through the HEAD stamps:
  the SSM reads during the ramp are what is counted against the 40 TPS quota.
- million: a ramp to 1,000,000 msg/s on one queue with `max_shards=256`, the shard map at its largest.

`python -m bench.twin --part control` measures them (`--part step|ramp|fleet|million` one); `make bench`
runs them and writes the section between START/END of docs/performance.md.
"""

from __future__ import annotations

import math
from typing import Any

from bench.twin.dynamo import TABLE_UNITS_PER_S
from bench.twin.scenarios import BATCH, BODY_BYTES, publish_load
from sluice.engine.scaling import WCU_BYTES, ScalingPolicy

PARTS = ("step", "ramp", "fleet", "million")
STEP_AT = 20
START, END = "<!-- twin-control:start -->", "<!-- twin-control:end -->"
FLEET = 1_200
WARM_S = 40.0
# Write units one message costs: the HEAD update and the batch put of `BATCH` messages of `BODY_BYTES`.
WCU_PER_MESSAGE = (2 + BATCH * BODY_BYTES / WCU_BYTES) / BATCH


def shards_needed(msgs_per_s: float) -> int:
    """What a load needs at the policy's target utilization (70 % of 1,000 WCU/s per shard)."""
    policy = ScalingPolicy()
    return math.ceil(msgs_per_s * WCU_PER_MESSAGE / (policy.shard_wcu_ceiling * policy.target_utilization))


def _ramp(peak: float, ramp_s: float, start: float = 0.0) -> Any:
    return lambda t: 1_000 + (peak - 1_000) * min(1.0, max(0.0, t - start) / ramp_s)


def measure(part: str, quick: bool) -> dict[str, Any]:
    seconds = 20 if quick else 60
    sample = 0.05 if quick else 0.25
    if part == "step":
        at = STEP_AT // 2 if quick else STEP_AT
        result = publish_load(
            lambda t: 1_000 if t < at else 100_000, seconds, sample=sample, first_rule_at=5.0
        )
        result["at"] = at
    elif part == "ramp":
        result = publish_load(_ramp(200_000, seconds * 0.6), seconds, sample=sample, first_rule_at=5.0)
    elif part == "fleet":
        sample, warm = (0.05, WARM_S) if quick else (0.25, WARM_S)
        result = publish_load(
            _ramp(200_000, seconds * 0.6, warm),
            warm + seconds,
            sample=sample,
            first_rule_at=5.0,
            fleet=FLEET,
            warm_s=warm,
        )
        result["warm_s"] = warm
    else:
        sample = 0.02 if quick else 0.05
        result = publish_load(
            _ramp(1_000_000, seconds * 0.6), seconds, sample=sample, max_shards=256, first_rule_at=5.0
        )
    result["seconds"] = seconds
    return result


def _front_door_verdict(million: dict[str, Any], sustained: float) -> str:
    """Whether the queue got its rate with the account's quotas to spare."""
    full = (
        million["peak_executions"] >= 0.95 * million["lambda_quota"]
        or sustained / BATCH >= 0.9 * million["api_rps"]
    )
    if sustained < 0.98 * 1_000_000 or not full:
        return ""
    return (
        " So one queue reaches a million messages a second on these quotas with nothing to spare: the "
        "account's API Gateway and Lambda quotas are all this queue's, and its consumers in the same "
        "account and Region need them raised."
    )


def _refusals(refused: dict[str, float]) -> str:
    by = {"TooManyRequests": "by API Gateway (429)", "ExecutionRefused": "by Lambda (the gateway's 500)"}
    return ", ".join(f"{n:,.0f} {by.get(k, k)}" for k, n in refused.items()) or "none"


def tail(values: list[float], share: float = 0.2) -> list[float]:
    return values[int(len(values) * (1 - share)) :]


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def absorbed(result: dict[str, Any], at: int, share: float = 0.95, hold: int = 3) -> int | None:
    """Seconds from `at` until stored stays within `share` of offered for `hold` seconds with under
    10 % of write attempts throttled (as docs/performance.md "DynamoDB twin" (2) measures it)."""
    d, o = result["delivered"], result["offered"]
    attempts, throttled = result["write_attempts"], result["throttled_attempts"]
    for s in range(at, len(d) - hold + 1):
        if all(
            d[i] >= share * o[i] and throttled[i] <= 0.10 * max(1.0, attempts[i]) for i in range(s, s + hold)
        ):
            return s - at
    return None


def throttled_share(result: dict[str, Any], window: slice) -> float:
    """Throttled write attempts over all write attempts in `window` (seconds)."""
    return sum(result["throttled_attempts"][window]) / max(1.0, sum(result["write_attempts"][window]))


def report(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        START,
        "## Twin: the control plane at scale (SSM quota, map size, 1,000+ containers)",
        "",
        "`python -m bench.twin --part control` (run by `make bench`; bench/twin/control.py). SSM is",
        "modelled as AWS limits it (bench/twin/ssm.py): values ≤ 4 KB Standard / 8 KB Advanced, GetParameter,",
        "GetParameters and GetParametersByPath sharing 40 transactions per second (scaled with the sample),",
        "PutParameter 3 per second. Each broker container has its own engine and cached map; the coordinator",
        "is a Lambda started by its minute rule and by throttled brokers (sluice/engine/wake.py). SSM figures",
        "are read attempts per virtual second, full scale. Every send passes the front door as deployed, at",
        "AWS's default quotas: API Gateway's 10,000 requests a second per account and Region (a bucket of",
        "5,000; each route's throttle set to the same, `-c api_throttle_rate=10000 -c api_throttle_burst=5000`,",
        "bench/twin/gateway.py), then Lambda's 1,000 concurrent executions, 10,000 invocations a second and",
        "1,000 new environments per function every 10 s (bench/twin/lambdas.py); a refused send is sent again",
        "after its Retry-After. Each shard table takes at most 40,000 write and 40,000 read units a second, an",
        "on-demand table's default quota (bench/twin/dynamo.py).",
        "",
    ]
    step, ramp, fleet, million = (results.get(p) for p in PARTS)
    if step:
        at = step["at"]
        took = absorbed(step, at)
        needed = shards_needed(100_000)
        lines += [
            f"### Step 1,000 → 100,000 msg/s at t = {at} s",
            "",
            f"Sample {step['sample']:g}. Absorbed (stored ≥ 95 % of offered, < 10 % of write attempts throttled, "
            f"3 s running) **{took if took is not None else 'not'} s** after the step (target ≤ 10 s); write "
            f"attempts throttled over the first 10 s: **{100 * throttled_share(step, slice(at, at + 10)):.1f} %** "
            f"(target ≤ 10 %); open shards {sorted(set(step['shards']))}: peak **{max(step['shards'])}** where "
            f"{needed} are needed at 70 % ({max(step['shards']) / needed:.2f}x; target ≤ 2x). The coordinator was "
            f"woken {step['wakes']} time(s) by throttled brokers; broker containers "
            f"{step['containers'] / step['sample']:,.0f}; SSM reads {max(step['ssm_reads']):.0f}/s at most, "
            f"{sum(step['ssm_read_throttles']):.0f} throttled (cold containers then read the control item).",
            "",
            "Before (main at 89fb311, same scenario): 18 s, 74 % throttled, 128 shards.",
            "",
        ]
    if ramp:
        sustained = mean(tail(ramp["delivered"]))
        lines += [
            "### Ramp 1,000 → 200,000 msg/s on one queue",
            "",
            f"Sample {ramp['sample']:g}. Sustained over the last {ramp['seconds'] * 0.2:.0f} s: **{sustained:,.0f} "
            f"msg/s** stored of {mean(tail(ramp['offered'])):,.0f} offered (Poisson arrivals) on "
            f"{ramp['shards'][-1]} shards; write attempts throttled then "
            f"{100 * throttled_share(ramp, slice(int(ramp['seconds'] * 0.8), ramp['seconds'])):.1f} %. "
            f"Broker containers {ramp['containers'] / ramp['sample']:,.0f} (1,028 before: sends waited out the "
            f"SDK's backoff on throttled shards); SSM reads {max(ramp['ssm_reads']):.0f}/s at most, "
            f"{sum(ramp['ssm_read_throttles']):.0f} throttled; map changes {sum(ramp['ssm_puts'])}.",
            "",
        ]
    if fleet:
        warm = int(fleet["warm_s"])
        ramp_reads = fleet["ssm_reads"][warm:]
        sustained = mean(tail(fleet["delivered"]))
        lines += [
            f"### Ramp to 200,000 msg/s with {fleet['containers'] / fleet['sample']:,.0f} broker containers",
            "",
            f"{FLEET:,} containers warmed over the first {warm} s (each reads the document once: "
            f"{max(fleet['ssm_reads'][:warm]):.0f} reads/s at most), then the ramp over "
            f"{fleet['seconds'] * 0.6:.0f} s. Sustained over the last {fleet['seconds'] * 0.2:.0f} s: "
            f"**{sustained:,.0f} msg/s** stored of {mean(tail(fleet['offered'])):,.0f} offered, on "
            f"{fleet['shards'][-1]} shards. Map changes during the ramp: "
            f"{sum(fleet['ssm_puts'][warm:])} (shard counts {sorted(set(fleet['shards'][warm:]))}). SSM reads "
            f"during the ramp: **{sum(ramp_reads):,.0f} in all, {max(ramp_reads):.0f}/s at most** (quota 40/s), "
            f"{sum(fleet['ssm_read_throttles']):.0f} throttled. Under the polling design each container re-read "
            f"the map every 5 s: {FLEET / 5:,.0f} reads/s.",
            "",
        ]
    if million:
        sustained = mean(tail(million["delivered"]))
        thr = throttled_share(million, slice(int(million["seconds"] * 0.8), million["seconds"]))
        peak = max(million["shards"])
        limit = 256 * ScalingPolicy().shard_wcu_ceiling / WCU_PER_MESSAGE
        lines += [
            "### Ramp to 1,000,000 msg/s on one queue, max_shards = 256",
            "",
            f"Sample {million['sample']:g}. Ramp over {million['seconds'] * 0.6:.0f} s, then held. Sustained over "
            f"the last {million['seconds'] * 0.2:.0f} s: **{sustained:,.0f} msg/s** stored of "
            f"{mean(tail(million['offered'])):,.0f} offered, on {million['shards'][-1]} shards (peak {peak}); "
            f"write attempts throttled then: {100 * thr:.1f} %. "
            f"The shard map at its largest: {million['map_bytes']:,} B mirrored (largest SSM value written: "
            f"{million['ssm_largest_value']:,} B, Standard). SSM reads {max(million['ssm_reads']):.0f}/s at most, "
            f"{sum(million['ssm_read_throttles']):.0f} throttled (cold containers while the first shards were "
            f"saturated; they read the control item instead); broker containers "
            f"{million['containers'] / million['sample']:,.0f}.",
            "",
            f"The front door at this rate: {sustained / BATCH:,.0f} sends a second, of API Gateway's "
            f"{million['api_rps']:,.0f}; Lambda executions at most **{million['peak_executions']:,.0f}** "
            f"(quota {million['lambda_quota']:,}); sends refused and sent again: "
            f"{_refusals(million['refused'])}. The busiest shard table wrote "
            f"**{million['peak_table_units'][1]:,.0f} units** in one second (quota {TABLE_UNITS_PER_S:,.0f})."
            + _front_door_verdict(million, sustained)
            + (
                " The shard tables are at their quota too: past this rate the queue needs more of them "
                "(`-c shard_table_count`, 4 by default) or a raised quota, not more shards."
                if million["peak_table_units"][1] >= 0.95 * TABLE_UNITS_PER_S
                else ""
            ),
            "",
            f"What limits it: 256 shards x 1,000 WCU/s hold {limit:,.0f} msg/s of 100 x 200 B sends at 100 % of "
            f"every partition, {limit * ScalingPolicy().target_utilization:,.0f} at the policy's 70 % target; "
            "beyond the target the coordinator can add no shard (max_shards), so the held load runs the "
            "partitions hotter than the policy aims for."
            + (" It falls short of 1,000,000." if sustained < 0.98 * 1_000_000 else ""),
            "",
        ]
    walls = ", ".join(f"{part} {r.get('wall_s', 0):.0f} s" for part, r in results.items())
    lines.append(f"Wall time on this machine: {walls}.")
    lines.append(END)
    return "\n".join(lines)
