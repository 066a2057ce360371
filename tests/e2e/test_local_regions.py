"""`sluice local --regions us-east-1,eu-west-1` as a subprocess: one moto, a runtime per region, the
control table replicated between them, a delay between regions and a switch that takes one down.

One server for the module (starting two regions takes a while). Its AWS calls go to an IAM audit file
and a call log of its own: the call log counts cross-region calls per function; the audit is checked
against each region's own roles here (the session's audit judges single-region roles).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sluice import constants as c
from sluice.client import SluiceApiError, SluiceClient
from sluice.engine import keys
from sluice.local.callaudit import load_call_log
from sluice.local.provision import local_name
from tests.e2e.conftest import E2E_TOKEN, worker_pids

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HOME, AWAY = "us-east-1", "eu-west-1"
DELAY_MS, LAG_MS = 40, 300
READY = re.compile(r"sluice local ready on (http://\S+) \((\S+)\) (http://\S+) \((\S+)\)\n")
FEATURE_WAIT_SECONDS = 20.0
NO_ENGINE_SUPPORT = (
    "needs the engine's multi-region support (issue 13, r-data/r-control): a queue created on a "
    "two-region deployment has no open shard in every region here"
)


@dataclass
class Regions:
    process: subprocess.Popen
    urls: dict[str, str]  # region -> API URL, home first
    call_log: Path
    audit: Path
    engine_support: bool | None = field(default=None)

    def client(self, region: str, **options: Any) -> SluiceClient:
        return SluiceClient(self.urls[region], E2E_TOKEN, **options)


def _start(tmp: Path) -> Regions:
    call_log, audit = tmp / "calls.jsonl", tmp / "iam-audit.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    env.update({c.ENV_CALL_LOG_FILE: str(call_log), c.ENV_IAM_AUDIT_FILE: str(audit)})
    process = subprocess.Popen(
        [
            sys.executable,
            *("-m", "sluice.cli", "local", "--port", "0", "--admin-token", E2E_TOKEN),
            *("--regions", f"{HOME},{AWAY}"),
            *("--inter-region-delay-ms", str(DELAY_MS), "--replication-lag-ms", str(LAG_MS)),
            *("--time-scale", "2"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,  # a kill on failure takes its containers too
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        found = READY.fullmatch(line)
        if found:
            return Regions(process, {found[2]: found[1], found[4]: found[3]}, call_log, audit)
    os.killpg(process.pid, signal.SIGKILL)
    pytest.fail("sluice local --regions did not print its ready line")


def _stop(regions: Regions) -> float:
    """SIGTERM; the seconds it took to exit (SIGKILL and a failure past 10 s)."""
    started = time.monotonic()
    regions.process.send_signal(signal.SIGTERM)
    try:
        regions.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(regions.process.pid, signal.SIGKILL)
        regions.process.wait()
        pytest.fail("sluice local --regions still running 10 s after SIGTERM")
    return time.monotonic() - started


@pytest.fixture(scope="module")
def regions(tmp_path_factory) -> Iterator[Regions]:
    server = _start(tmp_path_factory.mktemp("regions"))
    yield server
    if server.process.poll() is None:
        _stop(server)


def _raw(url: str, method: str = "GET", token: str = E2E_TOKEN, body: Any = None) -> tuple[int, Any]:
    """One HTTP request, no retries (the SDK retries a 503, which is what is looked at here)."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _switch(regions: Regions, via: str, region: str, state: str) -> dict[str, Any]:
    status, doc = _raw(f"{regions.urls[via]}/_local/regions/{region}/{state}", "POST")
    assert status == 200, doc
    return doc["result"]


def _moto(regions: Regions, region: str) -> Any:
    """A DynamoDB client on the moto server every region shares, for `region`."""
    import botocore.session

    status, doc = _raw(f"{regions.urls[HOME]}/_local/regions")
    assert status == 200, doc
    return botocore.session.get_session().create_client(
        "dynamodb",
        region_name=region,
        endpoint_url=doc["result"]["aws_endpoint_url"],
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def _eventually(check, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _engine_support(regions: Regions) -> bool:
    """The feature check: a queue created on this deployment gets open shards in every region."""
    if regions.engine_support is None:
        client = regions.client(HOME)
        probe = f"probe-{uuid.uuid4().hex[:8]}"
        client.create_queue(probe)

        def every_region() -> bool:
            shards = client.shards(probe)
            return {s.get("region") for s in shards if s.get("state") == "open"} >= set(regions.urls)

        regions.engine_support = bool(_eventually(every_region, FEATURE_WAIT_SECONDS))
    return regions.engine_support


# --- the deployment --------------------------------------------------------------------------------


def test_each_region_serves_on_its_own_port(regions):
    assert list(regions.urls) == [HOME, AWAY]  # the ready line lists the home region first
    ports = {url.rsplit(":", 1)[1] for url in regions.urls.values()}
    assert len(ports) == 2
    for region in regions.urls:
        # The admin token reached the away region's replica before the ready line.
        assert any(t["queue"] == "*" for t in regions.client(region).list_tokens())
    status, doc = _raw(f"{regions.urls[AWAY]}/_local/regions")
    assert status == 200 and doc["result"]["regions"] == [
        {"region": HOME, "down": False},
        {"region": AWAY, "down": False},
    ]


def test_control_table_writes_replicate_to_every_region(regions):
    table = local_name("local", c.LOGICAL_CONTROL_TABLE)
    home, away = _moto(regions, HOME), _moto(regions, AWAY)
    key = {"pk": {"S": f"e2e-replication#{uuid.uuid4().hex}"}, "sk": {"S": "x"}}
    home.put_item(TableName=table, Item={**key, "v": {"S": "from home"}})
    got = _eventually(lambda: away.get_item(TableName=table, Key=key).get("Item"))
    assert got and got["v"] == {"S": "from home"}
    away.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET v = :v",
        ExpressionAttributeValues={":v": {"S": "away"}},
    )
    assert _eventually(
        lambda: home.get_item(TableName=table, Key=key).get("Item", {}).get("v") == {"S": "away"}
    )
    home.delete_item(TableName=table, Key=key)
    assert _eventually(lambda: "Item" not in away.get_item(TableName=table, Key=key))
    # What the engine writes too: a token created through the away region's API is in both tables.
    created = regions.client(AWAY).create_token("e2e-q", ["read"])
    token_id = created["token_id"]

    def listed(client: Any) -> bool:
        found = client.query(
            TableName=table,
            KeyConditionExpression="pk = :pk AND sk = :sk",
            ExpressionAttributeValues={":pk": {"S": keys.TOKENS_PK}, ":sk": {"S": token_id}},
        )
        return bool(found["Items"])

    assert _eventually(lambda: listed(home) and listed(away))


def test_a_region_switched_down_answers_503_and_calls_to_it_fail(regions):
    """With the home region down, its API answers 503; the away region's broker cannot reach the home
    control table (queue creation is a fenced write there): its AWS calls fail as connection errors,
    which the adapters report as DependencyUnavailable (503, code 10503)."""
    assert _switch(regions, AWAY, HOME, "down")["regions"][0] == {"region": HOME, "down": True}
    try:
        status, doc = _raw(f"{regions.urls[HOME]}/v1/queues")
        assert status == 503, doc
        status, doc = _raw(f"{regions.urls[AWAY]}/v1/queues", "POST", body={"queue_name": "e2e-while-down"})
        assert status == 503 and doc["errors"][0]["code"] == 10503, doc
        # Any region's port switches any region; the switch needs the admin token.
        status, _ = _raw(f"{regions.urls[HOME]}/_local/regions/{HOME}/up", "POST", token="not-admin")
        assert status == 403
    finally:
        assert _switch(regions, HOME, HOME, "up")["regions"][0] == {"region": HOME, "down": False}
    regions.client(AWAY).create_queue(f"e2e-after-{uuid.uuid4().hex[:6]}")  # back: it works again
    assert isinstance(regions.client(HOME).list_queues(), list)


@pytest.mark.parametrize("region", [HOME, AWAY])
def test_the_broker_makes_no_cross_region_call_while_sending(regions, region):
    if region != HOME and not _engine_support(regions):
        pytest.skip(NO_ENGINE_SUPPORT)  # today's engine publishes to the home region's shards
    client = regions.client(region)
    queue = f"e2e-near-{uuid.uuid4().hex[:6]}"
    regions.client(HOME).create_queue(queue)
    client.send(queue, {"warm": True})  # the broker has read the queue's shard map
    started = int(time.time() * 1000)
    for start in range(0, 200, 50):
        client.send_batch(queue, [{"body": {"n": n}} for n in range(start, start + 50)])
    ended = int(time.time() * 1000)
    calls = _broker_calls(regions, region, started, ended)
    assert calls, "the call log recorded no broker call while sending"
    far = [call for call in calls if call["region"] != call["caller_region"]]
    assert far == [], far


def _broker_calls(regions: Regions, caller: str, started: int, ended: int) -> list[dict[str, Any]]:
    return [
        call
        for call in load_call_log(regions.call_log)
        if call["function"] == c.FN_BROKER
        and call["caller_region"] == caller
        and started <= call["ts_ms"] <= ended
    ]


# --- the scenario of issue 13 ----------------------------------------------------------------------

PER_REGION, BATCH, GROUPS = 1000, 50, ("default", "second")


def test_two_regions_1000_each_one_consumer_drains_2000_exactly_once_per_group_through_an_outage(regions):
    """Producers in each region send 1,000 (0 cross-region broker calls); the away region goes down
    halfway: the home producers keep sending; after it returns, a consumer in the home region has
    received every message exactly once per group (two groups)."""
    if not _engine_support(regions):
        pytest.skip(NO_ENGINE_SUPPORT)
    queue = f"e2e-world-{uuid.uuid4().hex[:6]}"
    admin = regions.client(HOME)
    admin.create_queue(queue)
    admin.create_group(queue, GROUPS[1], "earliest")
    for region in regions.urls:
        regions.client(region).send(queue, {"warm": region})  # each broker has the shard map
    sent: dict[str, list[str]] = {region: [] for region in regions.urls}
    window: dict[str, list[int]] = {}

    def produce(region: str, count: int) -> None:
        client = regions.client(region)
        window.setdefault(region, []).append(int(time.time() * 1000))
        for _ in range(0, count, BATCH):
            batch = [{"body": {"region": region, "n": len(sent[region]) + n}} for n in range(BATCH)]
            sent[region] += client.send_batch(queue, batch)["message_ids"]
        window[region].append(int(time.time() * 1000))

    # Half in each region, at once.
    both = [threading.Thread(target=produce, args=(r, PER_REGION // 2)) for r in regions.urls]
    for t in both:
        t.start()
    for t in both:
        t.join()
    assert all(len(ids) == PER_REGION // 2 for ids in sent.values())

    # A consumer in the home region drains both groups while the away region is down, then after.
    delivered: dict[str, list[str]] = {g: [] for g in GROUPS}
    uncertain: dict[str, set[str]] = {g: set() for g in GROUPS}  # in an ack that failed or fell short
    warm: set[str] = set()
    stop = threading.Event()
    consumer_errors: list[BaseException] = []
    target = 2 * PER_REGION + len(regions.urls)  # and the warm-up messages

    def consume(group: str) -> None:
        client = regions.client(HOME, max_attempts=2)
        give_up = time.monotonic() + 900  # a failed test must not leave this thread behind
        while time.monotonic() < give_up:
            try:
                result = client.pull(queue, batch_size=50, visibility_timeout_ms=10_000, consumer_group=group)
            except SluiceApiError:
                time.sleep(0.2)  # a pull that met the outage: try again
                continue
            if not result.messages:
                if stop.is_set() and len(set(delivered[group])) >= target and result.backlog == 0:
                    return
                time.sleep(0.2)
                continue
            delivered[group] += [m.id for m in result.messages]
            warm.update(m.id for m in result.messages if isinstance(m.body, dict) and "warm" in m.body)
            try:
                answer = client.ack(queue, [m.lease_id for m in result.messages])
            except SluiceApiError:  # the away region's shards cannot take the ack: they come back
                answer = {"ackCount": -1}
            if answer["ackCount"] != len(result.messages):
                uncertain[group].update(m.id for m in result.messages)

    consumers = [
        threading.Thread(target=_guard, args=(consume, g, consumer_errors), daemon=True) for g in GROUPS
    ]
    for t in consumers:
        t.start()
    _switch(regions, HOME, AWAY, "down")
    try:
        produce(HOME, PER_REGION // 2)  # the home region's producers do not stop
        status, _ = _raw(f"{regions.urls[AWAY]}/v1/queues/{queue}/messages", "POST", body={"body": 1})
        assert status == 503  # while the away region is down
    finally:
        _switch(regions, HOME, AWAY, "up")
    produce(AWAY, PER_REGION // 2)
    stop.set()
    deadline = time.monotonic() + 600
    for t in consumers:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in consumers), {g: len(set(delivered[g])) for g in GROUPS}
    assert not consumer_errors, consumer_errors

    every = {*sent[HOME], *sent[AWAY]}
    assert len(every) == 2 * PER_REGION
    for group in GROUPS:
        assert set(delivered[group]) - warm == every, group  # every message, none other
        twice = {m for m in delivered[group] if delivered[group].count(m) > 1}
        assert twice <= uncertain[group], twice - uncertain[group]  # again only after a failed ack
        assert admin.metrics(queue)["consumer_groups"][group]["backlog_count"] == 0, group
    for region in regions.urls:
        started, ended = window[region][0], window[region][-1]
        calls = _broker_calls(regions, region, started, ended)
        assert calls and not [x for x in calls if x["region"] != x["caller_region"]], region


def _guard(target, arg: str, failures: list[BaseException]) -> None:
    try:
        target(arg)
    except BaseException as exc:  # surfaced by the test
        failures.append(exc)


def test_a_two_region_queue_of_256_shards_a_region_works_end_to_end_and_fits_ssm(regions):
    """512 shards in one map (256 in each region): sends in both regions, a consumer in the home
    region drains them, and every region's SSM values stay within what SSM takes (issue 23)."""
    import botocore.session

    from sluice.adapters.ssm import STANDARD_MAX_BYTES
    from sluice.engine import mapdoc

    if not _engine_support(regions):
        pytest.skip(NO_ENGINE_SUPPORT)
    queue = f"e2e-wide-{uuid.uuid4().hex[:6]}"
    admin = regions.client(HOME)
    admin.create_queue(queue, min_shards=256, max_shards=256)
    sent: set[str] = set()
    for region in regions.urls:
        for r in range(10):
            batch = [{"body": {"region": region, "r": r, "i": i}} for i in range(10)]
            sent |= set(regions.client(region).send_batch(queue, batch)["message_ids"])
    got: set[str] = set()
    deadline = time.monotonic() + 90
    while got < sent and time.monotonic() < deadline:
        pulled = admin.pull(queue, batch_size=100)
        got |= {m.id for m in pulled.messages}
        admin.ack(queue, [m.lease_id for m in pulled.messages])
    assert got == sent
    status, doc = _raw(f"{regions.urls[HOME]}/_local/regions")
    assert status == 200, doc
    prefix = c.SHARD_MAP_PREFIX_TEMPLATE.format(stage="local")  # `sluice local`'s stage
    for region in regions.urls:
        ssm = botocore.session.get_session().create_client(
            "ssm",
            region_name=region,
            endpoint_url=doc["result"]["aws_endpoint_url"],
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )
        values = {
            p["Name"]: p["Value"]
            for page in ssm.get_paginator("get_parameters_by_path").paginate(Path=prefix)
            for p in page["Parameters"]
        }
        mirrored = mapdoc.decode(values[f"{prefix}/{queue}"])
        assert len(mirrored.shards) == 512 and {s.region for s in mirrored.open_shards} == set(regions.urls)
        assert max(len(v.encode()) for v in values.values()) <= STANDARD_MAX_BYTES


# --- grants ------------------------------------------------------------------------------------------


def test_every_call_is_granted_by_the_role_of_the_callers_region(regions):
    """The module's IAM audit (every distinct call of every region's functions, the tests above
    included) against each function's role in its own region's template."""
    from sluice.local import iamcheck

    if "caller_region" not in iamcheck.Call.__dataclass_fields__:
        pytest.skip("needs iamcheck to judge a call by its caller's region's template (issue 13, r-stack)")
    calls = iamcheck.load_calls(regions.audit)
    assert {call.caller_region for call in calls} == set(regions.urls)
    denials = iamcheck.check(calls, iamcheck.template_for_stage)
    assert denials == [], iamcheck.report(calls, denials)


# --- stopping ------------------------------------------------------------------------------------------


def test_sigterm_stops_every_region_within_the_grace(regions):
    """Last in the module: it stops the module's server. Exit code 0: the stop finished before the
    runtime's watchdog (5 s) would have ended the process with 1."""
    pids = worker_pids(regions.process.pid)
    assert len(pids) >= 6  # broker, consumer and coordinator containers of both regions at least
    took = _stop(regions)
    assert regions.process.returncode == 0, took
    assert took < 10
    alive = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    assert alive == [], alive
    print(f"\nsluice local --regions exited {took:.2f} s after SIGTERM")
