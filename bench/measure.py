"""Measuring: the real Lambda handlers in-process on moto, driven through API Gateway v2 events, with
capacity units counted from the items read and written (bench/accounting.py) and handler CPU timed in
a second pass without the accounting probes; and local msg/s through the HTTP runtime and the SDK.
Prices are applied elsewhere (bench/prices.py): this module only counts."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench.faces import measure_faces
from bench.payloads import EVENTS, RANDOM_10K, RANDOM_64K, RANDOM_128K, RANDOM_200, Payload
from bench.prices import Usage, apigw_requests, billed_gb_seconds

TOKEN = "bench-admin-token"
PHASES = ("send", "pull", "ack")


@dataclass(frozen=True)
class Scenario:
    """Send `batch` messages per request, pull `batch` per request, ack every pull: in its own ack
    request, or (`ack_on_pull`) carried on the consumer's next pull."""

    payload: Payload
    batch: int
    ack_on_pull: bool = False
    tier: str = "auto"  # the queue's payload_tier; `dynamodb` measures the engine as before the tier

    @property
    def label(self) -> str:
        return f"{self.payload.label}, batch {self.batch}, " + (
            "acks on the next pull" if self.ack_on_pull else "ack requests"
        )

    def inline(self) -> Scenario:
        """The same scenario with every body inline in DynamoDB (payload_tier: dynamodb)."""
        return Scenario(self.payload, self.batch, self.ack_on_pull, "dynamodb")


# Issue 15's rows, then issue 24's: 10 KB at batch 1/10/100, 64 KB at 1/10/50 (a send of 50 is 3.2 MB,
# Lambda's request holds 6 MB) and Cloudflare's largest message, 128 KB, at 1 and 10.
_ROWS = (
    (RANDOM_200, (False, True), (1, 10, 100)),
    (EVENTS, (False, True), (1, 10, 100)),
    (RANDOM_10K, (False, True), (1, 10, 100)),
    (RANDOM_64K, (False, True), (1, 10, 50)),
    (RANDOM_128K, (False, True), (1, 10)),
)
SCENARIOS = tuple(
    Scenario(payload, batch, ack_on_pull)
    for payload, modes, batches in _ROWS
    for ack_on_pull in modes
    for batch in batches
)


def setup_aws_env() -> None:
    from sluice.local.runtime import LOCAL_AWS_ENV

    os.environ.update(LOCAL_AWS_ENV)
    os.environ.setdefault("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")


class Handlers:
    """Calls the real Lambda handlers in-process with API Gateway v2 events."""

    def __init__(self) -> None:
        from sluice.local import gateway
        from sluice.local.workers import invoke

        self._gateway, self._invoke = gateway, invoke
        self.request_bytes: list[int] = []

    def __call__(self, method: str, path: str, body: Any = None) -> Any:
        route, params = self._gateway.match(method, path)  # type: ignore[misc]
        data = b"" if body is None else json.dumps(body).encode()
        self.request_bytes.append(len(data))
        headers = [("content-type", "application/json"), ("authorization", f"Bearer {TOKEN}")]
        event = self._gateway.build_event(route, params, method, path, "", headers, data)
        status, _h, _c, out = self._gateway.unpack_response(self._invoke(route.function, event))
        doc = json.loads(out) if out else None
        if status >= 300:
            raise RuntimeError(f"{method} {path} -> {status}: {doc}")
        assert doc is not None, f"{method} {path} answered {status} without a body"
        return doc["result"]


class AwsTimer:
    """Process CPU seconds spent inside botocore calls (from `provide-client-params` to `after-call`),
    so handler CPU can exclude them. With in-process moto that also covers moto's own work."""

    def __init__(self) -> None:
        self.inside = 0.0
        self.calls = 0
        self.s3_calls = 0
        self._start = 0.0

    def attach(self, client: Any) -> None:
        client.meta.events.register_first("provide-client-params", self._begin)
        client.meta.events.register("after-call", self._end)

    def _begin(self, **_kwargs: Any) -> None:
        self._start = time.process_time()

    def _end(self, model: Any = None, **_kwargs: Any) -> None:
        self.inside += time.process_time() - self._start
        self.calls += 1
        if model is not None and model.service_model.service_id.hyphenize() == "s3":
            self.s3_calls += 1


@dataclass
class PhaseFigures:
    messages: int = 0
    requests: int = 0
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    wcu: float = 0.0
    rcu: float = 0.0
    cpu_s: float = 0.0  # handler CPU excluding AWS calls
    aws_calls_timed: int = 0
    s3_calls_timed: int = 0
    request_bytes: list[int] = field(default_factory=list)
    batch_item_bytes: int = 0
    object_bytes: int = 0

    def per_request(self, value: float) -> float:
        return value / self.requests if self.requests else 0.0


class Tap:
    """Collects one request's figures into a phase: units and calls (with an accountant), CPU outside
    AWS calls (with a timer), request bytes always."""

    def __init__(self, call: Handlers, accountant: Any = None, timer: AwsTimer | None = None) -> None:
        self.call, self.accountant, self.timer = call, accountant, timer

    @contextmanager
    def __call__(self, fig: PhaseFigures, messages: int = 0) -> Iterator[Callable[[int], None]]:
        if self.accountant:
            self.accountant.reset()
        self.call.request_bytes.clear()
        aws0 = self.timer.inside if self.timer else 0.0
        calls0 = self.timer.calls if self.timer else 0
        s3_0 = self.timer.s3_calls if self.timer else 0
        cpu0 = time.process_time()

        def count(n: int) -> None:
            fig.messages += n

        yield count
        cpu = time.process_time() - cpu0
        if self.timer:
            fig.cpu_s += cpu - (self.timer.inside - aws0)
            fig.aws_calls_timed += self.timer.calls - calls0
            fig.s3_calls_timed += self.timer.s3_calls - s3_0
        fig.messages += messages
        fig.requests += 1
        fig.request_bytes += self.call.request_bytes
        if self.accountant:
            t = self.accountant.reset()
            fig.calls.update(t.calls)
            fig.wcu += t.wcu
            fig.rcu += t.rcu
            fig.batch_item_bytes += t.batch_item_bytes
            fig.object_bytes += t.object_bytes


def run_scenario(call: Handlers, sc: Scenario, total: int, tap: Tap, seed: int) -> dict[str, PhaseFigures]:
    """Send `total` messages, then drain them. With acks on the next pull, the last batch's acks go in
    an ack request outside the figures: a consumer in steady state always has a next pull."""
    name = f"bench-{sc.batch}-{os.urandom(3).hex()}"
    base = f"/v1/queues/{name}/messages"
    call("POST", "/v1/queues", {"queue_name": name, "settings": {"payload_tier": sc.tier}})
    call("POST", base, {"messages": [{"body": "warm", "content_type": "text"}]})
    warm = call("POST", f"{base}/pull", {"batch_size": 1})["messages"]
    call("POST", f"{base}/ack", {"acks": [{"lease_id": m["lease_id"]} for m in warm]})
    figures = {p: PhaseFigures() for p in PHASES}
    bodies = sc.payload.bodies(total, seed)
    for start in range(0, total, sc.batch):
        msgs = [{"body": b, "content_type": ct} for b, ct in bodies[start : start + sc.batch]]
        with tap(figures["send"], len(msgs)):
            call("POST", base, {"messages": msgs})
    received, carried = 0, list[dict[str, Any]]()
    while received < total:
        request: dict[str, Any] = {"batch_size": sc.batch}
        if carried:
            request["acks"] = carried
        with tap(figures["pull"]) as counted:
            got = call("POST", f"{base}/pull", request)
            counted(len(got["messages"]))
        if carried and got["ack"]["ackCount"] != len(carried):
            raise RuntimeError(f"acks on the pull were not all applied: {got['ack']}")
        leases = [{"lease_id": m["lease_id"]} for m in got["messages"]]
        if not leases:
            raise RuntimeError("pull returned nothing before the queue was drained")
        received += len(leases)
        if sc.ack_on_pull:
            carried = leases
            continue
        with tap(figures["ack"], len(leases)):
            call("POST", f"{base}/ack", {"acks": leases})
    if carried:
        call("POST", f"{base}/ack", {"acks": carried})
    return figures


def measure_in_process(scenarios: tuple[Scenario, ...] = SCENARIOS) -> dict[Scenario, dict[str, Any]]:
    """Units with the accountant (probing item sizes), then CPU in a second pass without probes.
    Returns per scenario: the phase figures of the units pass and the CPU figures per phase."""
    setup_aws_env()
    import boto3
    from moto import mock_aws

    from bench.accounting import Accountant
    from sluice.adapters import aws
    from sluice.local.provision import provision
    from sluice.service import Sluice
    from sluice.settings import get_settings

    out: dict[Scenario, dict[str, Any]] = {}
    with mock_aws():
        settings = provision(None, "bench")
        os.environ.update(settings.to_env())
        get_settings.cache_clear()
        Sluice.from_settings(settings).tokens.create("*", ["admin"], token=TOKEN)
        call = Handlers()
        accountant = Accountant(boto3.client("dynamodb", region_name="us-east-1")).start()
        for sc in scenarios:
            out[sc] = {"units": run_scenario(call, sc, max(3 * sc.batch, 30), Tap(call, accountant), seed=1)}
        accountant.stop()
        timer = AwsTimer()
        stop = aws.instrument(timer.attach)
        for sc in scenarios:
            figs = run_scenario(call, sc, max(5 * sc.batch, 100), Tap(call, None, timer), seed=2)
            out[sc]["cpu"] = {
                p: {
                    "us_per_msg": 1e6 * figs[p].cpu_s / max(1, figs[p].messages),
                    "ms_per_request": 1e3 * figs[p].per_request(figs[p].cpu_s),
                    "calls_per_request": figs[p].per_request(
                        figs[p].aws_calls_timed - figs[p].s3_calls_timed
                    ),
                    "s3_calls_per_request": figs[p].per_request(figs[p].s3_calls_timed),
                }
                for p in PHASES
            }
        stop()
    return out


def usage(figs: dict[str, PhaseFigures], cpu: dict[str, dict[str, float]]) -> Usage:
    """Per message: units from the units pass, requests and billed duration from both passes."""
    msgs = figs["send"].messages
    gbs = sum(
        f.requests
        * billed_gb_seconds(
            cpu[p]["ms_per_request"], cpu[p]["calls_per_request"], cpu[p].get("s3_calls_per_request", 0.0)
        )
        for p, f in figs.items()
    )

    def s3(*ops: str) -> float:
        return sum(f.calls[("s3", op)] for f in figs.values() for op in ops) / msgs

    return Usage(
        wru=sum(f.wcu for f in figs.values()) / msgs,
        rru=sum(f.rcu for f in figs.values()) / msgs,
        apigw_requests=sum(apigw_requests(b) for f in figs.values() for b in f.request_bytes) / msgs,
        invocations=sum(f.requests for f in figs.values()) / msgs,
        gb_seconds=gbs / msgs,
        s3_puts=s3("PutObject", "ListObjectsV2"),
        s3_gets=s3("GetObject"),
        hot_item_bytes=sum(f.batch_item_bytes for f in figs.values()) / msgs,
        hot_object_bytes=sum(f.object_bytes for f in figs.values()) / msgs,
    )


def mean_body_bytes(payload: Payload, count: int = 1000) -> float:
    """The mean stored body size of a payload (JSON bodies are stored compact)."""
    bodies = payload.bodies(count, seed=1)
    return sum(
        len(b.encode() if isinstance(b, str) else json.dumps(b, separators=(",", ":")).encode())
        for b, _ in bodies
    ) / len(bodies)


# --- local end to end ------------------------------------------------------------------------------------


def _threads(n: int, work: Any) -> None:
    ts = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def measure_e2e(total: int = 2000, threads: int = 4) -> dict[str, Any]:
    setup_aws_env()
    import boto3

    from sluice.client import SluiceClient
    from sluice.local.runtime import LocalRuntime, free_port

    runtime = LocalRuntime(port=free_port(), admin_token=TOKEN)
    runtime.start()
    try:
        client = SluiceClient(runtime.url, TOKEN)
        name = f"e2e-{os.urandom(3).hex()}"
        client.create_queue(name)
        bodies = [b for b, _ in RANDOM_200.bodies(100, seed=3)]
        per_thread = total // threads

        def send(_i: int) -> None:
            for _ in range(per_thread // 100):
                client.send_batch(name, [{"body": b, "content_type": "text"} for b in bodies])

        t0 = time.perf_counter()
        _threads(threads, send)
        send_rate = total / (time.perf_counter() - t0)
        got = [0]
        lock = threading.Lock()

        def consume(_i: int) -> None:
            while True:
                with lock:
                    if got[0] >= total:
                        return
                res = client.pull(name, batch_size=100)
                if res.messages:
                    client.ack(name, [m.lease_id for m in res.messages])
                with lock:
                    got[0] += len(res.messages)
                    if not res.messages and got[0] >= total:
                        return

        t0 = time.perf_counter()
        _threads(threads, consume)
        pull_rate = total / (time.perf_counter() - t0)

        host, port = runtime._moto.get_host_and_port()
        sqs = boto3.client("sqs", endpoint_url=f"http://{host}:{port}", region_name="us-east-1")
        url = sqs.create_queue(QueueName=f"bench-{os.urandom(3).hex()}")["QueueUrl"]

        def sqs_send(i: int) -> None:
            for b in range(per_thread // 10):
                entries = [{"Id": str(k), "MessageBody": bodies[k + 10 * (b % 10)]} for k in range(10)]
                sqs.send_message_batch(QueueUrl=url, Entries=entries)

        sqs_total = min(total, 400)  # moto's SQS is slow; its rate settles within a few hundred
        per_thread = sqs_total // threads
        t0 = time.perf_counter()
        _threads(threads, sqs_send)
        sqs_send_rate = sqs_total / (time.perf_counter() - t0)
        got[0] = 0
        empty = [0]

        def sqs_consume(_i: int) -> None:
            while True:
                with lock:
                    if got[0] >= sqs_total or empty[0] > 20:
                        return
                res = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60)
                msgs = res.get("Messages", [])
                if msgs:
                    entries = [
                        {"Id": str(k), "ReceiptHandle": m["ReceiptHandle"]} for k, m in enumerate(msgs)
                    ]
                    sqs.delete_message_batch(QueueUrl=url, Entries=entries)
                with lock:
                    got[0] += len(msgs)
                    empty[0] += 0 if msgs else 1

        t0 = time.perf_counter()
        _threads(threads, sqs_consume)
        sqs_pull_rate = got[0] / (time.perf_counter() - t0)
        faces = measure_faces(runtime.url, client, bodies[:10])
        client.close()
    finally:
        runtime.stop()
    return {
        "send": send_rate,
        "pull_ack": pull_rate,
        "sqs_send": sqs_send_rate,
        "sqs_pull_ack": sqs_pull_rate,
        "total": total,
        "threads": threads,
        "faces": faces,
    }
