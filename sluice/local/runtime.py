"""`sluice local`: an embedded moto server, the stack's resources on it, and the HTTP API served by the
same Lambda handlers through API Gateway v2 events.

Scheduled work is the template's: every EventBridge rule fires its target asynchronously, at its rate
divided by `time_scale`, with the rule's own input; the coordinator's cadence variables come from the
template too (divided alike). The one timer the stack does not define is DynamoDB's TTL deletion,
which AWS does by itself and moto never does (`DYNAMODB_TTL_SWEEP_SECONDS`)."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import socket
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing import get_context
from typing import Any
from urllib.parse import unquote

from moto.server import ThreadedMotoServer

from sluice import constants as c
from sluice.local import gateway, moto_patches
from sluice.local.provision import provision
from sluice.local.schedules import Schedule, schedule_environment, schedules_from_template
from sluice.local.template import load_template
from sluice.local.workers import FunctionPool, terminate_now
from sluice.local.workers import invoke as invoke_in_process
from sluice.service import Sluice
from sluice.settings import Settings

LOCAL_REGION = "us-east-1"
# Local credentials for moto; real ones are never needed or read.
LOCAL_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_SESSION_TOKEN": "local",
    "AWS_DEFAULT_REGION": LOCAL_REGION,
    "AWS_REGION": LOCAL_REGION,
}
DEFAULT_CONCURRENCY = {c.FN_BROKER: 4, c.FN_CONSUMER: 6, c.FN_COORDINATOR: 1}
# Asynchronous invocations (Lambda InvocationType=Event: push workers, shard work) run on separate
# pools, so they never take the containers that serve HTTP requests.
DEFAULT_ASYNC_CONCURRENCY = {c.FN_CONSUMER: 4, c.FN_SHARD: 1}
# DynamoDB deletes items past their TTL by itself (AWS runs no function for it); moto never does, so
# the runtime deletes them every this many seconds, in a process of its own (`ShardWorker.sweep`).
DYNAMODB_TTL_SWEEP_SECONDS = 5.0
log = logging.getLogger("sluice.local")
_INVOKE_PATH = re.compile(r"^/2015-03-31/functions/(?P<name>[^/]+)/invocations$")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class LocalRuntime:
    host: str = "127.0.0.1"
    port: int = 8787
    admin_token: str | None = None
    stage: str = "local"
    concurrency: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_CONCURRENCY))
    async_concurrency: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_ASYNC_CONCURRENCY))
    # The template's schedules run `time_scale` times faster (1: the deployed rates); False: none run
    # (tests and benchmarks that invoke functions themselves).
    time_scale: float = 1.0
    run_schedules: bool = True
    ttl_sweep_seconds: float | None = DYNAMODB_TTL_SWEEP_SECONDS  # None: no TTL emulation
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. coordinator tuning for tests

    def start(self) -> None:
        os.environ.update(LOCAL_AWS_ENV)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every call
        moto_patches.apply()
        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
        self._moto.start()
        host, port = self._moto.get_host_and_port()
        template = load_template()
        self.schedules: list[Schedule] = schedules_from_template(template, self.time_scale)
        self.settings: Settings = provision(f"http://{host}:{port}", self.stage, template=template)
        engine = Sluice.from_settings(self.settings)
        if self.admin_token:
            engine.tokens.create("*", ["admin"], token=self.admin_token)
        self._http = ThreadingHTTPServer((self.host, self.port), _make_handler(self))
        self._http.daemon_threads = True
        self.port = self._http.server_address[1]
        env = {
            **LOCAL_AWS_ENV,
            **self.settings.to_env(),
            c.ENV_POWERTOOLS_SERVICE_NAME: c.SERVICE_NAME,
            "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
            # EMF lines have no CloudWatch to go to here and would mix into `sluice local`'s stdout,
            # which carries only the ready line; POWERTOOLS_METRICS_DISABLED=false shows them.
            "POWERTOOLS_METRICS_DISABLED": os.environ.get("POWERTOOLS_METRICS_DISABLED", "true"),
            c.ENV_POWERTOOLS_METRICS_NAMESPACE: c.METRICS_NAMESPACE,
            # The coordinator starts functions through the Lambda Invoke API this runtime serves.
            c.ENV_LAMBDA_ENDPOINT_URL: self.url,
            c.ENV_SHARD_FUNCTION: c.FN_SHARD,
            c.ENV_CONSUMER_FUNCTION: c.FN_CONSUMER,
            c.ENV_ALLOW_LOCAL_WEBHOOKS: "1",
            **schedule_environment(template, self.time_scale),
            **self.extra_env,
        }
        self._env = env
        self.pools = {fn: FunctionPool(fn, n, env) for fn, n in self.concurrency.items()}
        self._async_pools: dict[str, FunctionPool] = {}
        self._async_lock = threading.Lock()
        for pool in self.pools.values():
            pool.warm()
        self._stopping = threading.Event()
        for schedule in self.schedules if self.run_schedules else []:
            threading.Thread(
                target=self._run_schedule, args=(schedule,), name=f"rule-{schedule.rule}", daemon=True
            ).start()
        if self.ttl_sweep_seconds:
            # A process of its own, like a Lambda container: the sweep's boto3 work stays off this
            # process, which serves HTTP and moto.
            self._ttl_pool = ProcessPoolExecutor(
                max_workers=1, mp_context=get_context("spawn"), initializer=_set_environment, initargs=(env,)
            )
            threading.Thread(target=self._sweep_ttl, name="ddb-ttl", daemon=True).start()
        self._serve_thread = threading.Thread(
            target=self._http.serve_forever, name="sluice-http", daemon=True
        )
        self._serve_thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run_schedule(self, schedule: Schedule) -> None:
        """EventBridge's rate rule: fire every interval with the rule's input. A run that outlasts the
        interval delays the next firing until it ends (as a second Lambda run would wait on the
        coordinator's lease), and the firings missed meanwhile collapse into that one: no backlog."""
        next_at = time.monotonic() + schedule.interval_seconds
        while not self._stopping.wait(max(0.0, next_at - time.monotonic())):
            try:
                pool = self.pools.get(schedule.function) or self._async_pool(schedule.function)
                pool.invoke(schedule.event, timeout_seconds=900)
            except Exception:
                if not self._stopping.is_set():
                    log.exception("rule %s: %s failed", schedule.rule, schedule.function)
            next_at = max(next_at + schedule.interval_seconds, time.monotonic())

    def _sweep_ttl(self) -> None:
        """DynamoDB's TTL deletion, which moto lacks: drop items whose `exp` has passed."""
        while not self._stopping.wait(self.ttl_sweep_seconds or 0):
            try:
                self._ttl_pool.submit(sweep_expired_items).result()
            except Exception:
                if not self._stopping.is_set():
                    log.exception("TTL sweep failed")

    def invoke_async(self, function: str, event: dict[str, Any]) -> bool:
        """Lambda's InvocationType=Event: queue the event on the function's async pool."""
        if function not in c.FUNCTION_HANDLERS or not _handler_exists(function):
            logging.getLogger("sluice.local").info("no local handler for %s; event dropped", function)
            return False
        self._async_pool(function).submit(event, timeout_seconds=900)
        return True

    def _async_pool(self, function: str) -> FunctionPool:
        with self._async_lock:
            pool = self._async_pools.get(function)
            if pool is None:
                size = self.async_concurrency.get(function, 1)
                pool = self._async_pools[function] = FunctionPool(function, size, self._env)
            return pool

    def stop(self) -> None:
        self._stopping.set()
        self._http.shutdown()
        self._http.server_close()
        for pool in [*self.pools.values(), *self._async_pools.values()]:
            pool.close()
        if self.ttl_sweep_seconds:
            terminate_now(self._ttl_pool)
        self._moto.stop()

    def dispatch(
        self,
        method: str,
        raw_path: str,
        raw_query: str,
        headers: list[tuple[str, str]],
        body: bytes,
        source_ip: str,
    ) -> tuple[int, dict[str, str], bytes]:
        invoked = _INVOKE_PATH.match(raw_path) if method == "POST" else None
        if invoked:
            return self._invoke_api(unquote(invoked["name"]), dict(headers), body)
        found = gateway.match(method, raw_path)
        if found is None:
            return 404, {"Content-Type": "application/json"}, json.dumps({"message": "Not Found"}).encode()
        if len(body) > gateway.MAX_PAYLOAD_BYTES:
            return (
                413,
                {"Content-Type": "application/json"},
                json.dumps({"message": "Request Entity Too Large"}).encode(),
            )
        route, params = found
        event = gateway.build_event(route, params, method, raw_path, raw_query, headers, body, source_ip)
        response = self.pools[route.function].invoke(event)
        status, out_headers, cookies, data = gateway.unpack_response(response)
        if cookies:
            out_headers["Set-Cookie"] = "; ".join(cookies)
        return status, out_headers, data

    def _invoke_api(
        self, name: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """The Lambda Invoke API for this runtime's functions (`sluice-local-<fn>`, `<fn>` or an ARN)."""
        function = name.rsplit(":", 1)[-1].removeprefix("sluice-local-")
        kind = {k.lower(): v for k, v in headers.items()}.get("x-amz-invocation-type", "RequestResponse")
        event = json.loads(body or b"{}")
        json_type = {"Content-Type": "application/json"}
        if function not in c.FUNCTION_HANDLERS:
            message = {"Type": "User", "message": f"Function not found: {name}"}
            return (
                404,
                {**json_type, "x-amzn-ErrorType": "ResourceNotFoundException"},
                json.dumps(message).encode(),
            )
        if kind == "Event":
            self.invoke_async(function, event)
            return 202, json_type, b""
        pool = self.pools.get(function)
        result = pool.invoke(event) if pool else invoke_in_process(function, event)
        return 200, json_type, json.dumps(result).encode()


def _set_environment(env: dict[str, str]) -> None:
    os.environ.update(env)


@lru_cache(maxsize=1)
def _ttl_engine() -> Sluice:
    return Sluice.from_settings(Settings.from_env())


def sweep_expired_items() -> int:
    """One pass of DynamoDB's TTL deletion over every queue (run in the TTL process)."""
    return _ttl_engine().shard_worker.run("sweep").swept_items


def _handler_exists(function: str) -> bool:
    module_name = c.FUNCTION_HANDLERS[function].rpartition(".")[0]
    try:
        return importlib.util.find_spec(module_name) is not None
    except ModuleNotFoundError:
        return False


def _make_handler(runtime: LocalRuntime) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "sluice-local"

        def _serve(self) -> None:
            path, _, query = self.path.partition("?")
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            try:
                status, headers, data = runtime.dispatch(
                    self.command, path, query, list(self.headers.items()), body, self.client_address[0]
                )
            except Exception:  # the API Gateway answer to a crashed or timed-out integration
                logging.getLogger("sluice.local").exception("integration failed")
                status, headers = 500, {"Content-Type": "application/json"}
                data = json.dumps({"message": "Internal Server Error"}).encode()
            self.send_response(status)
            for name, value in headers.items():
                if name.lower() not in ("content-length", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve

        def __getattr__(self, name: str) -> Any:
            """Any other method (TRACE, QUERY, ...) goes to routing too: no route, so 404 as API
            Gateway answers, where http.server would answer 501."""
            if name.startswith("do_"):
                return self._serve
            raise AttributeError(name)

        def log_message(self, format: str, *args: Any) -> None:
            if os.environ.get("SLUICE_ACCESS_LOG"):
                super().log_message(format, *args)

    return Handler
