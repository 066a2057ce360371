"""The local runtime fails where AWS fails and recovers as Lambda does: crashed and hung containers are
replaced, the gateway refuses what API Gateway refuses (as JSON with a code), and SIGTERM stops
`sluice local` within seconds under load."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import urllib3

from sluice import constants as c
from sluice import errors
from sluice.client import SluiceApiError, SluiceClient
from sluice.local import gateway
from sluice.local.runtime import LocalRuntime
from sluice.local.template import (
    ThrottleLimits,
    api_targets_from_template,
    functions_from_template,
    load_template,
)
from sluice.local.workers import (
    FunctionConfig,
    FunctionOutOfMemory,
    FunctionPool,
    FunctionTimedOut,
    IntegrationTimedOut,
    InvocationFailed,
    InvocationThrottled,
)
from tests.e2e.conftest import start_local_server, stop_local_server, worker_pids

pytestmark = pytest.mark.e2e
TOKEN = "faults-e2e-token"


@contextlib.contextmanager
def _started(template: dict | None = None) -> Iterator[LocalRuntime]:
    """A runtime of two brokers and one consumer, without schedules (`template`: None, the stack's)."""
    rt = LocalRuntime(
        port=0,
        admin_token=TOKEN,
        stage="lfaults",
        concurrency={c.FN_BROKER: 2, c.FN_CONSUMER: 1},
        run_schedules=False,
        ttl_sweep_seconds=None,
        template=template,
    )
    rt.start()
    try:
        yield rt
    finally:
        rt.stop()


@pytest.fixture(scope="module")
def runtime():
    with _started() as rt:
        yield rt


def client(rt: LocalRuntime) -> SluiceClient:
    return SluiceClient(rt.url, TOKEN, max_attempts=1)


def raw(rt: LocalRuntime, data: bytes, *, shut_write: bool = False) -> tuple[int, dict]:
    """Send bytes as they are; (status, JSON body) of the answer."""
    with socket.create_connection((rt.host, rt.port), timeout=20) as sock:
        sock.sendall(data)
        if shut_write:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)


def request_head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: local", f"Authorization: Bearer {TOKEN}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def backlog(rt: LocalRuntime, queue: str) -> int:
    return client(rt).pull(queue, batch_size=1, visibility_timeout_ms=1000).backlog


# --- function configuration from the template -------------------------------------------------------


def test_function_timeout_memory_and_concurrency_come_from_the_template(runtime):
    functions = functions_from_template(load_template())
    assert set(functions) == set(c.FUNCTION_HANDLERS)
    for name, pool in runtime.pools.items():
        props = functions[name]
        assert pool.config.timeout_seconds == props["Timeout"]
        assert pool.config.memory_mb == props["MemorySize"]
        assert pool.config.reserved_concurrency == props.get("ReservedConcurrentExecutions")


def test_reserved_concurrency_caps_the_local_containers():
    template = {
        "Resources": {
            "Fn1A2B": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Handler": c.FUNCTION_HANDLERS[c.FN_SHARD],
                    "Timeout": 300,
                    "MemorySize": 2048,
                    "ReservedConcurrentExecutions": 1,
                },
            },
            "Other": {"Type": "AWS::Lambda::Function", "Properties": {"Handler": "x.y"}},
        }
    }
    ((name, props),) = functions_from_template(template).items()
    config = FunctionConfig.from_properties(props)
    assert (name, config) == (c.FN_SHARD, FunctionConfig(300.0, 2048, 1))
    assert FunctionPool(c.FN_SHARD, 4, {}, config).concurrency == 1
    assert FunctionConfig.from_properties({}) == FunctionConfig(3.0, 128, None)  # Lambda's defaults


def test_past_its_reservation_an_api_invocation_is_refused_at_once_as_lambda_refuses_it():
    """The gateway's invocation finds the one reserved execution busy: refused (the gateway's 500), not
    queued; where the laptop's cap is lower than the reservation, requests wait for a container."""
    pool = FunctionPool(c.FN_CONSUMER, 4, {}, FunctionConfig(30.0, 512, 1))
    assert pool.reservation_binds
    with pool._slots_taken(None):  # the reserved execution is in use (a long-poll, say)
        started = time.monotonic()
        with pytest.raises(InvocationThrottled):
            pool.invoke({}, wait_seconds=5, refuse_when_full=True)
        assert time.monotonic() - started < 1
    assert not FunctionPool(c.FN_CONSUMER, 2, {}, FunctionConfig(30.0, 512, 8)).reservation_binds


def test_async_starts_wait_no_longer_than_the_templates_event_age_scaled_by_the_time_scale(runtime):
    """The stack gives the coordinator, shard work and push workers (`consumer:live`) a 60 s event age."""
    for function, alias in [(c.FN_COORDINATOR, None), (c.FN_SHARD, None), (c.FN_CONSUMER, "live")]:
        pool = runtime._new_pool(function, 1, alias)
        assert pool.config.max_event_age_seconds == c.ASYNC_MAX_EVENT_AGE_SECONDS
    assert runtime._new_pool(c.FN_BROKER, 1).config.max_event_age_seconds == 6 * 3600  # Lambda's default
    scale, runtime.time_scale = runtime.time_scale, 60.0
    try:
        assert runtime._new_pool(c.FN_SHARD, 1).config.max_event_age_seconds == 1.0
    finally:
        runtime.time_scale = scale


def test_an_async_event_that_waited_past_its_event_age_is_dropped_unrun(runtime):
    """A pool of one, busy: the queued event outlives its age and never runs; a fresh one still does."""
    pool = FunctionPool(c.FN_BROKER, 1, runtime._env, FunctionConfig(max_event_age_seconds=0.5))
    try:
        with pool._slots_taken(None):  # the one execution is busy
            pool.submit(_list_queues_event())
            time.sleep(1.0)
        deadline = time.monotonic() + 10
        while pool.expired == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (pool.expired, pool.pids()) == (1, [])  # no container took it
        pool.submit(_list_queues_event())
        while not pool.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.pids() and pool.expired == 1
    finally:
        pool.close()


# --- crash recovery ---------------------------------------------------------------------------------


def test_sigkill_of_broker_workers_under_load_later_requests_succeed(runtime):
    queue = f"kill-{uuid.uuid4().hex[:8]}"
    client(runtime).create_queue(queue)
    pool = runtime.pools[c.FN_BROKER]
    replaced_before = pool.replaced
    stop = threading.Event()
    outcomes: list[tuple[float, int]] = []  # (start time, status) of each send
    bad_bodies: list[str] = []

    def sender() -> None:
        mine = client(runtime)
        while not stop.is_set():
            started = time.monotonic()
            try:
                mine.send(queue, {"n": 1})
                outcomes.append((started, 200))
            except SluiceApiError as exc:
                outcomes.append((started, exc.status))
                if (exc.status, exc.code, exc.message) != (500, None, "Internal Server Error"):
                    bad_bodies.append(f"{exc.status} {exc.code} {exc.message}")

    threads = [threading.Thread(target=sender) for _ in range(3)]
    for t in threads:
        t.start()
    kills = 0
    try:
        for _ in range(3):
            time.sleep(1.5)
            for pid in pool.pids():
                os.kill(pid, signal.SIGKILL)
                kills += 1
        last_kill = time.monotonic()
        deadline = last_kill + 90  # new containers cold-start: seconds on a loaded machine
        while time.monotonic() < deadline and sum(1 for w, s in outcomes if w > last_kill and s == 200) < 12:
            time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    # Once a send started after the last kill has succeeded, every later one succeeds.
    recovered = min((w for w, s in outcomes if w > last_kill and s == 200), default=float("inf"))
    after = [status for when, status in outcomes if when > recovered]
    print(
        f"\nbroker kills: {kills}, sends: {len(outcomes)}, statuses: "
        f"{ {s: sum(1 for _, x in outcomes if x == s) for s in {x for _, x in outcomes}} }, "
        f"containers replaced: {pool.replaced - replaced_before}"
    )
    assert kills >= 3
    assert not bad_bodies, bad_bodies[:5]  # a crashed invocation answers as API Gateway does
    assert pool.replaced - replaced_before >= 1
    assert len(after) >= 5 and set(after) == {200}, after  # the function recovered
    assert client(runtime).send(queue, {"n": 2})["message_ids"]


def _list_queues_event() -> dict:
    route, params = gateway.match("GET", "/v1/queues")
    headers = [("authorization", f"Bearer {TOKEN}")]
    return gateway.build_event(route, params, "GET", "/v1/queues", "", headers, b"")


def test_a_hung_container_is_killed_at_the_function_timeout_and_replaced(runtime):
    pool = FunctionPool(c.FN_BROKER, 1, runtime._env, FunctionConfig(timeout_seconds=3))
    try:
        pool.warm()
        assert pool.invoke(_list_queues_event())["statusCode"] == 200
        (pid,) = pool.pids()
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(FunctionTimedOut):
            pool.invoke(_list_queues_event())
        assert 2.5 < time.monotonic() - started < 10
        assert pool.replaced == 1 and pid not in pool.pids()
        assert pool.invoke(_list_queues_event())["statusCode"] == 200  # a new container
    finally:
        pool.close()


def _peak_mb(pid: int) -> float:
    """A container's peak resident set (what Lambda reports as Max Memory Used), from Linux's /proc."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _send_5_mb_event() -> dict:
    """A send of 5 MB: refused (a request holds at most 4 MiB of messages), after the container has
    held it and parsed it, 20-30 MB more than a listing needs."""
    route, params = gateway.match("POST", "/v1/queues/mem-q/messages")
    headers = [("content-type", "application/json"), ("authorization", f"Bearer {TOKEN}")]
    body = json.dumps({"messages": [{"body": "x" * 50_000} for _ in range(100)]}).encode()
    return gateway.build_event(route, params, "POST", "/v1/queues/mem-q/messages", "", headers, body)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads a container's peak from /proc")
def test_a_container_past_its_memory_size_is_killed_mid_invocation_and_replaced(runtime):
    """Sized by measurement: a first container shows what a listing needs; a function given 12 MB more
    lists, then dies on the 5 MB request as Lambda kills a function past its MemorySize."""
    roomy = FunctionPool(c.FN_BROKER, 1, runtime._env, FunctionConfig(memory_mb=10_240))
    try:
        assert roomy.invoke(_list_queues_event())["statusCode"] == 200
        listing_mb = _peak_mb(roomy.pids()[0])
    finally:
        roomy.close()
    tight = FunctionPool(c.FN_BROKER, 1, runtime._env, FunctionConfig(memory_mb=int(listing_mb) + 12))
    try:
        assert tight.invoke(_list_queues_event())["statusCode"] == 200
        (pid,) = tight.pids()
        with pytest.raises(FunctionOutOfMemory, match="signal: killed"):
            tight.invoke(_send_5_mb_event())
        assert tight.replaced == 1 and pid not in tight.pids()
        assert tight.invoke(_list_queues_event())["statusCode"] == 200  # a new container
    finally:
        tight.close()


@pytest.mark.slow
def test_a_shard_function_of_256_mb_flushes_240_mb_of_1_mb_messages(runtime):
    """A shard that fell behind with large messages: its flush gathered every body before writing one
    segment (a peak of 319 MB measured here: killed at every try at 256 MB); bounded by text, it
    writes segments of at most 8 MiB of NDJSON (40 here) and peaks at 97 MB."""
    from sluice.engine.shardwork import FLUSH_MAX_TEXT_BYTES

    name = f"big-{uuid.uuid4().hex[:8]}"
    sluice = client(runtime)
    sluice.create_queue(name, max_message_bytes=1_048_576)
    for batch in range(60):
        sluice.send_batch(name, [{"body": f"{batch:03d}{n}" + "m" * 999_000} for n in range(4)])
    event = {"kind": "shard.work", "queue": name, "shards": [0], "actions": ["flush"]}
    pool = FunctionPool(c.FN_SHARD, 1, runtime._env, FunctionConfig(timeout_seconds=300, memory_mb=256))
    try:
        report = pool.invoke(event)
    finally:
        pool.close()
    assert report["flushed_records"] == 240, report
    assert report["segments_written"] >= 240 * 1_332_000 // FLUSH_MAX_TEXT_BYTES, report


def test_the_integration_timeout_answers_before_a_longer_function_timeout(runtime):
    pool = FunctionPool(c.FN_BROKER, 1, runtime._env, FunctionConfig(timeout_seconds=6))
    try:
        pool.warm()
        (pid,) = pool.pids()
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(IntegrationTimedOut):
            pool.invoke(_list_queues_event(), wait_seconds=1)
        assert time.monotonic() - started < 3
        deadline = time.monotonic() + 20  # the invocation itself runs on to its own timeout
        while pool.replaced == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pool.replaced == 1
        assert pool.invoke(_list_queues_event(), wait_seconds=30)["statusCode"] == 200
    finally:
        pool.close()


class _FakePool:
    def __init__(self, outcome):
        self.outcome = outcome

    def invoke(self, event, wait_seconds=None, refuse_when_full=False):
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


@pytest.mark.parametrize(
    ("outcome", "status", "body"),
    [
        (InvocationFailed("boom"), 500, {"message": "Internal Server Error"}),
        (IntegrationTimedOut("slow"), 503, {"message": "Service Unavailable"}),
        (
            {"statusCode": 200, "body": "x" * (gateway.LAMBDA_RESPONSE_LIMIT_BYTES + 1)},
            500,
            {"message": "Internal Server Error"},
        ),
    ],
    ids=["function-error", "integration-timeout", "response-over-6MB"],
)
def test_failed_invocations_answer_as_api_gateway(outcome, status, body):
    rt = LocalRuntime()
    rt.api_targets = api_targets_from_template(load_template())  # what `start` reads: the deployed routes
    rt.throttle = gateway.StageThrottle(None, rt.api_targets)
    rt.pools = {c.FN_BROKER: _FakePool(outcome)}
    got_status, headers, data = rt.dispatch("GET", "/v1/queues", "", [], b"", "127.0.0.1")
    assert (got_status, json.loads(data)) == (status, body)
    assert headers["Content-Type"] == "application/json"


# --- gateway limits and its own input handling ------------------------------------------------------


def test_a_body_over_6_mb_gets_413_with_a_code_and_nothing_runs(runtime):
    queue = f"big-{uuid.uuid4().hex[:8]}"
    client(runtime).create_queue(queue)
    body = json.dumps({"messages": [{"body": "x" * (6 * 1024 * 1024)}]}).encode()
    resp = urllib3.request(
        "POST",
        f"{runtime.url}/v1/queues/{queue}/messages",
        body=body,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    doc = json.loads(resp.data)
    assert resp.status == 413
    assert doc["message"] == "Request Entity Too Large"
    assert doc["errors"][0]["code"] == errors.GatewayPayloadTooLarge.code == 10413
    assert backlog(runtime, queue) == 0


def test_a_body_cut_off_before_its_content_length_is_never_executed(runtime):
    queue = f"cut-{uuid.uuid4().hex[:8]}"
    client(runtime).create_queue(queue)
    full = json.dumps({"messages": [{"body": "hello"}]}).encode()
    head = request_head(
        "POST",
        f"/v1/queues/{queue}/messages",
        {"Content-Type": "application/json", "Content-Length": str(len(full) + 10)},
    )
    status, doc = raw(runtime, head + full, shut_write=True)
    assert status == 400 and doc["errors"][0]["code"] == errors.GatewayRequestMalformed.code
    assert backlog(runtime, queue) == 0


@pytest.mark.parametrize(
    ("length", "status", "code"),
    [
        ("-5", 400, 10400),
        ("abc", 400, 10400),
        ("12, 13", 400, 10400),
        ("99999999999999999999999", 413, 10413),
    ],
    ids=["negative", "non-numeric", "two-values", "huge"],
)
def test_bad_content_length_gets_a_json_4xx(runtime, length, status, code):
    head = request_head("POST", "/v1/queues", {"Content-Type": "application/json", "Content-Length": length})
    got, doc = raw(runtime, head + b"{}")
    assert (got, doc["errors"][0]["code"]) == (status, code)
    assert doc["success"] is False


def test_a_chunked_body_is_read_and_a_cut_off_one_refused(runtime):
    queue = f"chunk-{uuid.uuid4().hex[:8]}"
    client(runtime).create_queue(queue)
    body = json.dumps({"messages": [{"body": "hello"}]}).encode()
    head = request_head(
        "POST",
        f"/v1/queues/{queue}/messages",
        {"Content-Type": "application/json", "Transfer-Encoding": "chunked", "Connection": "close"},
    )
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:])) + b"0\r\n\r\n"
    status, doc = raw(runtime, head + chunked)
    assert status == 200 and doc["success"], doc
    status, doc = raw(runtime, head + chunked[:-12], shut_write=True)  # last chunk cut short
    assert status == 400 and doc["errors"][0]["code"] == errors.GatewayRequestMalformed.code
    assert backlog(runtime, queue) == 1


def test_a_100k_url_gets_414_json(runtime):
    status, doc = raw(runtime, request_head("GET", "/v1/queues/" + "a" * 100_000, {}))
    assert status == 414 and doc["errors"][0]["code"] == errors.GatewayUriTooLong.code


def test_headers_over_api_gateway_quota_get_431_json(runtime):
    status, doc = raw(runtime, request_head("GET", "/v1/queues", {"X-Pad": "p" * 11_000}))
    assert status == 431 and doc["errors"][0]["code"] == errors.GatewayHeadersTooLarge.code


# --- the stage throttle ----------------------------------------------------------------------------

THROTTLE = ThrottleLimits(rate=5.0, burst=5)
SQS_ROUTE, SQS_THROTTLE = "POST /", ThrottleLimits(rate=0.01, burst=1)  # the SQS face's one route


@pytest.fixture(scope="module")
def throttled_runtime():
    """A runtime whose stage throttles each route to 5 requests a second in bursts of 5, and the SQS
    face's route apart to one every 100 s, as the stack synthesizes with `-c api_throttle_rate=5
    -c api_throttle_burst=5 -c api_route_throttles='POST /=0.01:1'` (the default template, changed
    here to spare a synthesis)."""
    template = copy.deepcopy(load_template())
    (stage,) = (r for r in template["Resources"].values() if r["Type"] == "AWS::ApiGatewayV2::Stage")
    stage["Properties"]["DefaultRouteSettings"].update(
        ThrottlingRateLimit=THROTTLE.rate, ThrottlingBurstLimit=THROTTLE.burst
    )
    stage["Properties"]["RouteSettings"] = {
        SQS_ROUTE: {"ThrottlingRateLimit": SQS_THROTTLE.rate, "ThrottlingBurstLimit": SQS_THROTTLE.burst}
    }
    with _started(template) as rt:
        yield rt


def send_raw(rt: LocalRuntime, queue: str, body: str) -> tuple[int, dict]:
    """One send, never retried: (status, JSON body)."""
    resp = urllib3.request(
        "POST",
        f"{rt.url}/v1/queues/{queue}/messages",
        json={"messages": [{"body": body}]},
        headers={"Authorization": f"Bearer {TOKEN}"},
        retries=False,
        timeout=30,  # the sends let through wait their turn at two containers
    )
    return resp.status, json.loads(resp.data)


def test_a_route_throttled_apart_refuses_past_its_own_limits(throttled_runtime):
    """`POST /` (every SQS action) at one request every 100 s, in bursts of 1: of three requests in a
    row the first goes on (the face answers it, here for want of a signature) and the others get the
    gateway's 429; the stage's other routes keep their own buckets of 5."""
    rt = throttled_runtime
    statuses = sqs_route_statuses(rt.url, 3)
    assert statuses[0] != 429 and statuses[1:] == [429, 429], statuses
    assert client(rt).list_queues() is not None  # another route, another bucket


def sqs_route_statuses(url: str, count: int) -> list[int]:
    """The statuses of `count` SQS ListQueues calls on `POST /` in a row, unsigned and never retried."""
    return [
        urllib3.request(
            "POST",
            f"{url}/",
            body=b"{}",
            headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues"},
            retries=False,
            timeout=30,
        ).status
        for _ in range(count)
    ]


def test_sluice_local_runs_the_stack_its_context_synthesizes():
    """`sluice local -c KEY=VALUE`, as `cdk deploy -c`: here `POST /` throttled apart to one request
    every 100 s; a value the stack refuses stops it with the stack's reason."""
    server = start_local_server("-c", f"api_route_throttles={SQS_ROUTE}=0.01:1")
    try:
        statuses = sqs_route_statuses(server.url, 3)
        assert statuses[0] != 429 and statuses[1:] == [429, 429], statuses
    finally:
        stop_local_server(server)
    refused = subprocess.run(
        [sys.executable, "-m", "sluice.cli", "local", "--port", "0", "-c", "api_route_throttles=GET /x=1:1"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert refused.returncode != 0 and "'GET /x' is not a route" in refused.stderr, refused.stderr


def test_a_burst_past_the_stage_throttle_gets_429_and_runs_nothing_until_the_bucket_refills(
    throttled_runtime,
):
    rt = throttled_runtime
    queue = f"thr-{uuid.uuid4().hex[:8]}"
    client(rt).create_queue(queue)  # another route: its own bucket
    answers: dict[str, tuple[int, dict]] = {}
    at_once = threading.Barrier(4 * THROTTLE.burst)  # clients starting together, each on a connection

    def send(body: str) -> None:
        at_once.wait()
        answers[body] = send_raw(rt, queue, body)

    threads = [threading.Thread(target=send, args=(f"burst-{i}",)) for i in range(4 * THROTTLE.burst)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    sent = {body for body, (status, _) in answers.items() if status == 200}
    refused = [doc for status, doc in answers.values() if status == 429]
    assert len(sent) + len(refused) == len(threads), answers
    assert THROTTLE.burst <= len(sent) <= THROTTLE.burst + THROTTLE.rate * elapsed, (len(sent), elapsed)
    assert refused and all(
        doc["message"] == "Too Many Requests" and doc["errors"][0]["code"] == errors.GatewayThrottled.code
        for doc in refused
    ), refused

    SluiceClient(rt.url, TOKEN).send(queue, "retried")  # the bucket is still empty: the SDK tries again
    time.sleep(THROTTLE.burst / THROTTLE.rate + 0.1)  # full again
    refilled = [f"refilled-{i}" for i in range(THROTTLE.burst)]
    assert [send_raw(rt, queue, body)[0] for body in refilled] == [200] * THROTTLE.burst
    stored = []
    while pulled := client(rt).pull(queue, batch_size=100, visibility_timeout_ms=60_000).messages:
        stored += [m.body for m in pulled]
        time.sleep(1 / THROTTLE.rate)
    assert sorted(stored) == sorted([*sent, *refilled, "retried"])


@pytest.mark.parametrize(
    "junk",
    [
        bytes.fromhex("16030100a5010000a10303") + os.urandom(64) + b"\r\n\r\n",  # a TLS ClientHello
        b"\x00\x01\x02 garbage here\r\n\r\n",
        b"GET /v1/queues HTTP/9.9\r\n\r\n",
        b"HELLO\r\n\r\n",
    ],
    ids=["tls", "binary", "bad-version", "one-word"],
)
def test_garbage_request_lines_get_json_400(runtime, junk):
    status, doc = raw(runtime, junk)
    assert 400 <= status < 500 and doc["success"] is False and doc["errors"][0]["code"] == 10400


def test_the_gateway_still_serves_after_the_garbage(runtime):
    assert isinstance(client(runtime).list_queues(), list)


# --- SIGTERM --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_sluice_local_exits_within_10_s_of_sigterm_under_load():
    server = start_local_server()
    queue = f"term-{uuid.uuid4().hex[:8]}"
    server.client().create_queue(queue)
    stop = threading.Event()

    def load() -> None:
        mine = SluiceClient(server.url, server.token, max_attempts=1, timeout_seconds=5)
        while not stop.is_set():
            try:
                mine.send_batch(queue, [{"body": {"n": n}} for n in range(50)])
                mine.pull(queue, batch_size=10, visibility_timeout_ms=30_000)
            except Exception:  # the server goes away mid-request: expected here
                if stop.is_set():
                    return

    threads = [threading.Thread(target=load, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(4)
    assert len(worker_pids(server.process.pid)) >= 2
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        stop_local_server(server)
        pytest.fail("sluice local still running 10 s after SIGTERM")
    finally:
        stop.set()
    print(f"\nsluice local exited {time.monotonic() - started:.2f} s after SIGTERM under load")
