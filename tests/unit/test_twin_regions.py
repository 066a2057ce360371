"""The twin's region latency model (bench/twin/network.py) applies where the calls cross regions: a far
producer's publish costs about one modelled round trip more through another region's API, about two
when its broker writes another region's shards, and nothing more in its own region."""

from __future__ import annotations

import random

import pytest

from bench.twin import regions
from bench.twin.dynamo import Latency, TwinDynamo
from bench.twin.network import RTT_MS, Network
from bench.twin.sim import Sim
from bench.twin.world import TwinTable, percentile

EU, US = "eu-west-1", "us-east-1"
RTT = RTT_MS[frozenset({US, EU})]


def test_round_trips_are_per_pair_symmetric_and_zero_in_region():
    net = Network(random.Random(1))
    assert Network.base_rtt_s(US, EU) == Network.base_rtt_s(EU, US) == RTT / 1000
    assert Network.base_rtt_s(EU, EU) == Network.base_rtt_s(None, EU) == 0.0
    draws = [net.rtt(US, EU) * 1000 for _ in range(2000)]
    assert RTT * 0.95 < percentile(draws, 50) < RTT * 1.05  # jitter around the base, not a new base
    assert percentile(draws, 99) > percentile(draws, 50)
    leg = [net.client_leg(EU, EU) * 1000 for _ in range(500)]
    assert 0.5 < percentile(leg, 50) < 3.0  # the in-region client leg: a round trip inside the region


def test_a_call_to_another_regions_table_pays_the_round_trip():
    sim = Sim()
    dynamo = TwinDynamo(sim, Latency(rng=random.Random(2)), region=US, network=Network(random.Random(3)))
    table = TwinTable("t", dynamo)
    took: dict[str, list[float]] = {US: [], EU: []}

    def caller(region: str) -> None:
        for i in range(30):
            t0 = sim.now
            table.put({"pk": region, "sk": str(i), "v": 1})
            took[region].append((sim.now - t0) * 1000)

    for region in (US, EU):
        sim.spawn(region, lambda region=region: caller(region), region=region)
    sim.run_until(30.0)
    near, far = percentile(took[US], 50), percentile(took[EU], 50)
    assert len(took[EU]) == 30
    assert near < 10  # DynamoDB's own median, 4 ms
    assert RTT * 0.95 < far - near < RTT * 1.05


@pytest.fixture(scope="module")
def runs() -> dict[str, dict]:
    return {kind: regions.run(kind, seconds=4.0) for kind in regions.DEPLOYMENTS}


def _p50(runs: dict[str, dict], kind: str, producer: str) -> float:
    return percentile(runs[kind][producer]["client_ms"], 50)


def test_near_publish_is_in_region_in_every_region(runs):
    for producer in (US, EU, "ap-southeast-1"):
        assert runs["near"][producer]["sends"] >= 20
        assert _p50(runs, "near", producer) < 20  # the in-region target, the same everywhere


def test_far_publish_pays_one_round_trip_per_crossing(runs):
    near = _p50(runs, "near", EU)
    # through the home region's API: the request crosses once; the broker's calls are in-region
    assert RTT - 10 < _p50(runs, "single", EU) - near < RTT + 10
    assert percentile(runs["single"][EU]["broker_ms"], 50) < 20
    # its own region's API, shards in the home region: allocate and put each cross (Backend.table_for)
    assert 2 * RTT - 15 < _p50(runs, "remote", EU) - near < 2 * RTT + 15
    # the home region's producers see no difference between the deployments
    assert abs(_p50(runs, "single", US) - _p50(runs, "near", US)) < 5
