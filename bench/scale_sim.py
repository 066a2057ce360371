"""Scale simulator: the REAL coordinator policy (`sluice.engine.scaling.decide`) against a model of
DynamoDB's per-partition write limit, brokers with cached shard maps, head-update conflicts and Lambda
concurrency, under an offered load that ramps 1,000 → 200,000 msg/s and back.

Model (1-second ticks):
- Producers send requests of `batch` messages of `message_bytes` each. A request costs 1 WCU (head
  update) + ceil(batch bytes / 1 KB) WCU (the batch item) on its shard's partition key.
- A shard (one partition key) accepts 1,000 WCU/s; requests beyond that are throttled and retried
  by the client on the next tick (SDK backoff), counted as throttles on the shard.
- Brokers pick a random open shard from a cached map that lags the published one by 0..`map_ttl_s`
  seconds. A request on a shard sealed since then fails the head condition (1 WCU), the broker
  refreshes its map and retries on an open shard in the same request: no error reaches the client.
- Head conflicts (another broker's clock ahead): probability grows with the shard's request rate;
  each costs 1 WCU and a retry of the head update.
- Lambda: broker executions = requests/s x request duration; above the concurrency limit, requests
  are throttled (429) and retried on the next tick.
- Consumers drain each shard at `consume_per_shard` msg/s; a sealed shard is drained when its backlog is
  0 (then `decide` retires it).
- The coordinator runs every `period_s` (default: the deployed tick, `DEFAULT_COORDINATOR_TICK_SECONDS`,
  which the stack wires to the coordinator's loop inside its one-minute schedule), turns counter deltas
  into `ShardObservation`s and applies
  `decide`'s answer: new shards are open at once (brokers see them after their cache lag), sealed
  shards have their HEAD sealed right after the map write.

`run(...) -> dict` returns the figures; `python -m bench.scale_sim` prints them and writes a PNG.
"""

from __future__ import annotations

import argparse
import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sluice import constants as c
from sluice.engine.scaling import QueueObservation, ScalingPolicy, ShardObservation, decide

OUT = Path(__file__).resolve().parent / "out"
DEPLOYED_PERIOD_S = round(c.DEFAULT_COORDINATOR_TICK_SECONDS)  # the simulation steps whole seconds


@dataclass
class SimShard:
    id: int
    state: str = "open"
    counters: np.ndarray = field(default_factory=lambda: np.zeros(5))  # req, msgs, bytes, thr, cfl
    backlog: float = 0.0


def ramp_profile(
    low: float = 1_000, high: float = 200_000, warm: int = 60, up: int = 120, hold: int = 300, idle: int = 300
) -> list[float]:
    """Offered msg/s per second: warm at `low`, ramp to `high`, hold, ramp back, idle at `low`."""
    profile = [low] * warm
    profile += [low + (high - low) * (i + 1) / up for i in range(up)]
    profile += [high] * hold
    profile += [high - (high - low) * (i + 1) / up for i in range(up)]
    profile += [low] * idle
    return profile


def step_profile(
    low: float = 1_000, high: float = 100_000, before: int = 60, after: int = 240
) -> list[float]:
    return [low] * before + [high] * after


def run(
    profile: list[float] | None = None,
    *,
    policy: ScalingPolicy | None = None,
    batch: int = 100,
    message_bytes: int = 200,
    partition_wcu: float = 1_000.0,
    period_s: int = DEPLOYED_PERIOD_S,
    map_ttl_s: int = 5,
    min_shards: int = 1,
    max_shards: int = 128,
    lambda_concurrency: int = 1_000,
    request_seconds: float = 0.015,
    conflict_factor: float = 0.0005,
    consume_per_shard: float = 20_000.0,
    seed: int = 7,
) -> dict[str, Any]:
    """Simulate; returns per-second series and summary figures."""
    rng = np.random.default_rng(seed)
    policy = policy or ScalingPolicy(shard_wcu_ceiling=partition_wcu)
    profile = profile if profile is not None else ramp_profile()
    item_wcu = math.ceil(batch * message_bytes / 1024)
    request_wcu = 1 + item_wcu
    shards: list[SimShard] = [SimShard(i) for i in range(min_shards)]
    next_id = min_shards
    maps: deque[list[int]] = deque([[s.id for s in shards]] * (map_ttl_s + 1), maxlen=map_ttl_s + 1)
    prev_counters: dict[int, np.ndarray] = {}
    low_since: int | None = None
    retry_requests = 0.0
    carry = 0.0
    series: dict[str, list[float]] = {
        k: []
        for k in (
            "t",
            "offered",
            "accepted",
            "open",
            "throttle_ratio",
            "throttles",
            "attempts",
            "refused_on_sealed",
        )
    }
    for t, offered in enumerate(profile):
        by_id = {s.id: s for s in shards}
        open_now = [s.id for s in shards if s.state == "open"]
        maps.append(open_now)
        exact = offered / batch + carry
        new_requests = int(exact)
        carry = exact - new_requests
        attempts = new_requests + int(retry_requests)
        # Lambda concurrency for the broker function.
        capacity_requests = int(lambda_concurrency / request_seconds)
        lambda_throttled = max(0, attempts - capacity_requests)
        attempts_in = attempts - lambda_throttled
        # Brokers' cached maps lag by 0..map_ttl_s seconds: one cohort per lag.
        cohorts = rng.multinomial(attempts_in, [1 / len(maps)] * len(maps))
        per_shard = dict.fromkeys(by_id, 0)
        refused = 0
        for view, n in zip(maps, cohorts, strict=True):
            if n == 0:
                continue
            picks = rng.multinomial(n, [1 / len(view)] * len(view))
            for sid, k in zip(view, picks, strict=True):
                if not k:
                    continue
                shard = by_id.get(sid)
                if shard is None or shard.state != "open":
                    # sealed since this broker's map: the head refuses (a conditional failure, 1 WCU
                    # on the sealed shard), the broker refreshes and retries on a current open shard
                    if shard is not None:
                        shard.counters[4] += k
                    spread = rng.multinomial(k, [1 / len(open_now)] * len(open_now))
                    for sid2, k2 in zip(open_now, spread, strict=True):
                        per_shard[sid2] += int(k2)
                        refused += int(k2)
                else:
                    per_shard[sid] += int(k)
        accepted_requests = 0
        throttled = lambda_throttled
        for sid, k in per_shard.items():
            if not k:
                continue
            shard = by_id[sid]
            conflicts = rng.binomial(k, min(0.5, k * conflict_factor))  # each: 1 WCU, head retried
            budget = partition_wcu - conflicts
            ok = int(min(k, max(0.0, budget) // request_wcu))
            thr = k - ok
            shard.counters += np.array(
                [ok, ok * batch, ok * batch * message_bytes, thr, conflicts], dtype=float
            )
            shard.backlog += ok * batch
            accepted_requests += ok
            throttled += thr
        retry_requests = float(throttled)
        for shard in shards:  # consumers drain every readable shard
            shard.backlog = max(0.0, shard.backlog - consume_per_shard)
        series["t"].append(t)
        series["offered"].append(offered)
        series["accepted"].append(accepted_requests * batch)
        series["open"].append(len(open_now))
        series["throttles"].append(throttled)
        series["attempts"].append(attempts)
        series["throttle_ratio"].append(throttled / attempts if attempts else 0.0)
        series["refused_on_sealed"].append(refused)

        if t % period_s == period_s - 1:
            obs_shards = []
            for shard in shards:
                before = prev_counters.get(shard.id, np.zeros(5))
                rates = (shard.counters - before) / period_s
                prev_counters[shard.id] = shard.counters.copy()
                obs_shards.append(
                    ShardObservation(
                        id=shard.id,
                        state=shard.state,
                        requests_per_s=rates[0],
                        messages_per_s=rates[1],
                        bytes_per_s=rates[2],
                        throttles_per_s=rates[3],
                        conflicts_per_s=rates[4],
                        head_sealed=shard.state == "sealed",
                        drained=shard.backlog <= 0,
                        flushed=True,
                    )
                )
            decision = decide(
                QueueObservation("sim", min_shards, max_shards, obs_shards, t * 1000, False, low_since),
                policy,
            )
            low_since = decision.low_since_ms
            for sid in decision.seal:
                by_id[sid].state = "sealed"
            shards = [s for s in shards if s.id not in set(decision.retire)]
            for _ in range(decision.add):
                shards.append(SimShard(next_id))
                next_id += 1
    return _summarise(series, profile)


def _first_sustained(values: list[float], threshold: float, start: int, hold: int = 10) -> int | None:
    for i in range(start, len(values) - hold + 1):
        if all(v >= threshold for v in values[i : i + hold]):
            return i
    return None


def _summarise(series: dict[str, list[float]], profile: list[float]) -> dict[str, Any]:
    offered, accepted = series["offered"], series["accepted"]
    peak = max(profile)
    peak_idx = [i for i, v in enumerate(profile) if v >= peak]
    hold = peak_idx[len(peak_idx) // 5 :]  # the hold at peak, after its first fifth
    ramp_start = next(i for i, v in enumerate(profile) if v > profile[0])
    offered_100k = next((i for i, v in enumerate(offered) if v >= 100_000), None)
    accepted_100k = _first_sustained(accepted, 0.99 * 100_000, ramp_start)
    attempts = sum(series["attempts"])
    summary = {
        "sustained_msgs_per_s": float(np.mean([accepted[i] for i in hold])) if hold else 0.0,
        "peak_offered_msgs_per_s": peak,
        "time_to_100k_s": (accepted_100k - ramp_start) if accepted_100k is not None else None,
        "offered_reached_100k_after_s": (offered_100k - ramp_start) if offered_100k is not None else None,
        "throttle_ratio": sum(series["throttles"]) / attempts if attempts else 0.0,
        "throttle_ratio_at_peak": (
            sum(series["throttles"][i] for i in hold) / max(1, sum(series["attempts"][i] for i in hold))
        ),
        "max_shards": max(series["open"]),
        "final_shards": series["open"][-1],
        "series": series,
    }
    return summary


def step_time_to_scale(**kwargs: Any) -> dict[str, Any]:
    """1,000 → 100,000 msg/s at once: seconds until 99% of the offered load is accepted for 10 s."""
    profile = step_profile()
    result = run(profile, **kwargs)
    step_at = next(i for i, v in enumerate(profile) if v > profile[0])
    reached = _first_sustained(result["series"]["accepted"], 0.99 * 100_000, step_at)
    throttles = result["series"]["throttles"][step_at:]
    attempts = result["series"]["attempts"][step_at:]
    return {
        "step_time_to_scale_s": (reached - step_at) if reached is not None else None,
        "step_throttle_ratio": sum(throttles) / max(1, sum(attempts)),
        "step_shards": result["final_shards"],
    }


def plot(result: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = result["series"]
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    axes[0].plot(s["t"], [v / 1000 for v in s["offered"]], label="offered")
    axes[0].plot(s["t"], [v / 1000 for v in s["accepted"]], label="accepted")
    axes[0].set_ylabel("k msg/s")
    axes[0].legend()
    axes[0].set_title("Sluice scale simulator: real coordinator policy vs 1,000 WCU/s partitions")
    axes[1].step(s["t"], s["open"], where="post")
    axes[1].set_ylabel("open shards")
    axes[2].plot(s["t"], s["throttle_ratio"])
    axes[2].set_ylabel("throttled / attempts")
    axes[2].set_xlabel("seconds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peak", type=float, default=200_000)
    parser.add_argument(
        "--period",
        type=int,
        default=DEPLOYED_PERIOD_S,
        help="coordinator period, seconds (default: the deployed tick)",
    )
    parser.add_argument("--out", type=Path, default=OUT / "scale.png")
    args = parser.parse_args(argv)
    result = run(ramp_profile(high=args.peak), period_s=args.period)
    step = step_time_to_scale(period_s=args.period)
    path = plot(result, args.out)
    s = result["series"]
    print("time(s)  offered/s  accepted/s  shards  throttled")
    for i in range(0, len(s["t"]), 30):
        print(
            f"{s['t'][i]:7d}  {s['offered'][i]:9.0f}  {s['accepted'][i]:10.0f}  {s['open'][i]:6d}"
            f"  {s['throttle_ratio'][i]:8.1%}"
        )
    print(f"sustained throughput at peak : {result['sustained_msgs_per_s']:,.0f} msg/s")
    print(
        f"ramp: offered hit 100k after {result['offered_reached_100k_after_s']} s, accepted sustained "
        f"100k after {result['time_to_100k_s']} s"
    )
    print(
        f"step 1k -> 100k msg/s: time to scale {step['step_time_to_scale_s']} s, throttle ratio "
        f"{step['step_throttle_ratio']:.1%}, {step['step_shards']} shards"
    )
    print(
        f"throttle ratio: {result['throttle_ratio']:.2%} over the run, "
        f"{result['throttle_ratio_at_peak']:.2%} at peak"
    )
    print(f"shards: max {result['max_shards']}, final {result['final_shards']}")
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
