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
import signal
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing import get_context
from typing import Any, Protocol
from urllib.parse import unquote

from moto.server import ThreadedMotoServer

from sluice import constants as c
from sluice import errors
from sluice.local import gateway, interregion, moto_patches
from sluice.local.provision import TemplateUnavailable, provision
from sluice.local.schedules import Schedule, schedule_environment, schedules_from_template
from sluice.local.template import (
    ApiTarget,
    api_targets_from_template,
    functions_from_template,
    load_template,
    max_event_ages_from_template,
    route_throttles_from_template,
    stage_throttle_from_template,
)
from sluice.local.workers import (
    INTEGRATION_TIMEOUT_SECONDS,
    FunctionConfig,
    FunctionPool,
    IntegrationTimedOut,
    InvocationFailed,
)
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
# How many containers of each function this machine runs at most (a function's reserved concurrency in
# the template lowers it further); timeouts and memory come from the template.
DEFAULT_CONCURRENCY = {c.FN_BROKER: 4, c.FN_CONSUMER: 6, c.FN_COORDINATOR: 1}
# Asynchronous invocations (Lambda InvocationType=Event: push workers, shard work) run on separate
# pools, so they never take the containers that serve HTTP requests.
DEFAULT_ASYNC_CONCURRENCY = {c.FN_CONSUMER: 4, c.FN_SHARD: 1}
# DynamoDB deletes items past their TTL by itself (AWS runs no function for it); moto never does, so
# the runtime deletes them every this many seconds, in a process of its own (`ShardWorker.sweep`).
DYNAMODB_TTL_SWEEP_SECONDS = 5.0
log = logging.getLogger(__name__)
STOP_GRACE_SECONDS = 5.0  # SIGTERM to exit, at most (plus interpreter teardown)
BODY_READ_TIMEOUT_SECONDS = 30.0  # a client silent this long mid-request is cut off
LINGER_SECONDS, LINGER_MAX_READS = 0.2, 256  # draining a refused request's unread input (at most 16 MiB)
_INVOKE_PATH = re.compile(r"^/2015-03-31/functions/(?P<name>[^/]+)/invocations$")
# Routes the runtime answers itself, before any function: (method, path, headers) -> an answer, or
# None when the request is not one of them (`sluice.local.regions.OutageRoutes`).
AdminRoutes = Callable[[str, str, dict[str, str]], "tuple[int, dict[str, str], bytes] | None"]


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
    # One region of a multi-region `sluice local` (`sluice.local.regions`): the region served, the moto
    # server every region shares, this region's template and provisioned resources, and the outage
    # switch with the admin routes that flip it. None: a single-region runtime with its own moto.
    region: str | None = None
    endpoint_url: str | None = None
    template: dict[str, Any] | None = None
    provisioned: Settings | None = None
    outage: interregion.OutageSwitch | None = None
    admin_routes: AdminRoutes | None = None

    def start(self) -> None:
        os.environ.update(LOCAL_AWS_ENV)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every call
        endpoint = self.endpoint_url
        if endpoint is None:
            moto_patches.apply()
            self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
            self._moto.start()
            host, port = self._moto.get_host_and_port()
            endpoint = f"http://{host}:{port}"
        template = self.template if self.template is not None else load_template()
        self.schedules: list[Schedule] = schedules_from_template(template, self.time_scale)
        self.function_configs: dict[str, FunctionConfig] = {
            name: FunctionConfig.from_properties(props)
            for name, props in functions_from_template(template).items()
        }
        # What API Gateway invokes for each route, read from the template: the SnapStart alias of the
        # broker and consumer. Their HTTP pools run as that alias (restored containers); an async
        # pool runs what the Invoke call names: the coordinator's push workers `consumer:live` (as
        # the stack names it), shard work and the schedule's runs $LATEST.
        self.api_targets: dict[str, ApiTarget] = api_targets_from_template(template)
        self.max_event_ages = max_event_ages_from_template(template)
        self.aliases = {target.function: target.alias for target in self.api_targets.values()}
        self.throttle = gateway.StageThrottle(
            stage_throttle_from_template(template),
            self.api_targets,
            apart=route_throttles_from_template(template),
        )
        self.settings: Settings = self.provisioned or provision(endpoint, self.stage, template=template)
        engine = Sluice.from_settings(self.settings)
        if self.admin_token:
            engine.tokens.create("*", ["admin"], token=self.admin_token)
        self._http = _HttpServer((self.host, self.port), _make_handler(self))
        self.port = self._http.server_address[1]
        own_region = {"AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region} if self.region else {}
        env = {
            **LOCAL_AWS_ENV,
            **own_region,
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
            # A broker whose shards throttle wakes the coordinator through the same Invoke API.
            c.ENV_COORDINATOR_FUNCTION: c.FN_COORDINATOR,
            # Push workers through the consumer's alias, as the stack names it (`consumer:live`).
            c.ENV_CONSUMER_FUNCTION: ":".join(filter(None, (c.FN_CONSUMER, self.aliases.get(c.FN_CONSUMER)))),
            c.ENV_ALLOW_LOCAL_WEBHOOKS: "1",
            **schedule_environment(template, self.time_scale),
            **self.extra_env,
        }
        self._env = env
        self.pools = {fn: self._new_pool(fn, n, self.aliases.get(fn)) for fn, n in self.concurrency.items()}
        self._async_pools: dict[tuple[str, str | None], FunctionPool] = {}
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

    def _down(self) -> bool:
        """Whether this runtime's region is switched off (`sluice.local.interregion.OutageSwitch`)."""
        return bool(self.outage and self.region and self.outage.is_down(self.region))

    def _run_schedule(self, schedule: Schedule) -> None:
        """EventBridge's rate rule: fire every interval with the rule's input. A run that outlasts the
        interval delays the next firing until it ends (as a second Lambda run would wait on the
        coordinator's lease), and the firings missed meanwhile collapse into that one: no backlog."""
        next_at = time.monotonic() + schedule.interval_seconds
        while not self._stopping.wait(max(0.0, next_at - time.monotonic())):
            if self._down():  # the region's EventBridge is down with it
                next_at = time.monotonic() + schedule.interval_seconds
                continue
            try:
                pool = self.pools.get(schedule.function) or self._async_pool(schedule.function)
                pool.invoke(schedule.event)
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

    def invoke_async(self, function: str, event: dict[str, Any], alias: str | None = None) -> bool:
        """Lambda's InvocationType=Event: queue the event on the async pool of the function ($LATEST)
        or of its alias (containers restored from the snapshot, as Lambda runs an alias's version)."""
        if function not in c.FUNCTION_HANDLERS or not _handler_exists(function):
            log.info("no local handler for %s; event dropped", function)
            return False
        self._async_pool(function, alias).submit(event)
        return True

    def _async_pool(self, function: str, alias: str | None = None) -> FunctionPool:
        with self._async_lock:
            pool = self._async_pools.get((function, alias))
            if pool is None:
                size = self.async_concurrency.get(function, 1)
                pool = self._async_pools[(function, alias)] = self._new_pool(function, size, alias)
            return pool

    def _new_pool(self, function: str, concurrency: int, alias: str | None = None) -> FunctionPool:
        config = self.function_configs.get(function)
        if config is None:
            raise TemplateUnavailable(f"the template defines no function with handler {function!r}")
        config = replace(config, alias=alias)
        max_age = self.max_event_ages.get((function, alias))
        if max_age is not None:  # the schedules run `time_scale` times faster; so does staleness
            config = replace(config, max_event_age_seconds=max_age / self.time_scale)
        return FunctionPool(function, concurrency, self._env, config)

    def stop(self) -> None:
        """Stop at once: stop listening, kill every container (running invocations included, so
        nothing keeps calling moto), then stop moto."""
        self._stopping.set()
        self._http.shutdown()
        self._http.server_close()
        with self._async_lock:
            pools = [*self.pools.values(), *self._async_pools.values()]
        for pool in pools:
            pool.close()
        if self.ttl_sweep_seconds:
            _terminate_now(self._ttl_pool)
        if self.endpoint_url is None:  # its own moto, not one shared with other regions
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
        if self.admin_routes is not None:
            answered = self.admin_routes(method, raw_path, dict(headers))
            if answered is not None:
                return answered
        if self._down():  # the region is unreachable: its API Gateway answers for no function
            return gateway.SERVICE_UNAVAILABLE
        invoked = _INVOKE_PATH.match(raw_path) if method == "POST" else None
        if invoked:
            return self._invoke_api(unquote(invoked["name"]), dict(headers), body)
        found = gateway.match(method, raw_path)
        if found is None:
            return gateway.NOT_FOUND
        route, params = found
        target = self.api_targets.get(route.route_key)
        if target is None:  # a route the deployed API would not have
            return gateway.NOT_FOUND
        over = self.throttle.refusing(route.route_key)
        if over is not None:  # API Gateway's 429: the function is never invoked
            return gateway.throttled(over)
        event = gateway.build_event(route, params, method, raw_path, raw_query, headers, body, source_ip)
        if gateway.event_too_large(event):
            return gateway.refusal(
                errors.GatewayPayloadTooLarge(
                    "the request is over Lambda's 6 MB synchronous invocation limit "
                    f"({gateway.LAMBDA_REQUEST_LIMIT_BYTES} bytes of event)"
                )
            )
        try:
            pool = self.pools[target.function]
            response = pool.invoke(event, wait_seconds=INTEGRATION_TIMEOUT_SECONDS, refuse_when_full=True)
        except IntegrationTimedOut:
            log.warning("%s %s: no answer within the integration timeout", method, raw_path)
            return gateway.SERVICE_UNAVAILABLE
        except InvocationFailed as exc:
            log.warning("%s %s: %s", method, raw_path, exc)
            return gateway.INTERNAL_SERVER_ERROR
        if gateway.response_too_large(response):
            log.warning("%s %s: response over Lambda's 6 MB limit", method, raw_path)
            return gateway.INTERNAL_SERVER_ERROR
        status, out_headers, cookies, data = gateway.unpack_response(response)
        if cookies:
            out_headers["Set-Cookie"] = "; ".join(cookies)
        return status, out_headers, data

    def _invoke_api(
        self, name: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """The Lambda Invoke API for this runtime's functions (`sluice-local-<fn>`, `<fn>` or an ARN,
        each optionally qualified: `<fn>:live` runs the alias the template defines, `:$LATEST` as none)."""
        function, alias = _function_and_qualifier(name)
        alias = None if alias == _LATEST else alias
        kind = {k.lower(): v for k, v in headers.items()}.get("x-amz-invocation-type", "RequestResponse")
        event = json.loads(body or b"{}")
        json_type = {"Content-Type": "application/json"}
        if function not in c.FUNCTION_HANDLERS or (alias is not None and self.aliases.get(function) != alias):
            message = {"Type": "User", "message": f"Function not found: {name}"}
            return (
                404,
                {**json_type, "x-amzn-ErrorType": "ResourceNotFoundException"},
                json.dumps(message).encode(),
            )
        if kind == "Event":
            self.invoke_async(function, event, alias)
            return 202, json_type, b""
        pool = self.pools.get(function) or self._async_pool(function, alias)
        try:
            result = pool.invoke(event)
        except InvocationFailed as exc:  # Lambda answers 200 and marks the function error
            error = {"errorMessage": str(exc), "errorType": type(exc).__name__}
            return 200, {**json_type, "X-Amz-Function-Error": "Unhandled"}, json.dumps(error).encode()
        return 200, json_type, json.dumps(result).encode()


_LATEST = "$LATEST"


def _function_and_qualifier(name: str) -> tuple[str, str | None]:
    """(`broker`, `live`) from `broker`, `sluice-local-broker:live`, `arn:...:function:broker[:live]`."""
    resource = name.rpartition("function:")[2] if "function:" in name else name
    function, _, qualifier = resource.partition(":")
    return function.removeprefix("sluice-local-"), qualifier or None


def _set_environment(env: dict[str, str]) -> None:
    os.environ.update(env)
    interregion.install_from_env()  # the TTL sweep is in its region too: distance and outages apply


@lru_cache(maxsize=1)
def _ttl_engine() -> Sluice:
    return Sluice.from_settings(Settings.from_env())


def _terminate_now(pool: ProcessPoolExecutor) -> None:
    """Stop a process pool at once, a running task included (no public API before Python 3.14)."""
    processes = list((pool._processes or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()


def sweep_expired_items() -> int:
    """One pass of DynamoDB's TTL deletion over every queue (run in the TTL process)."""
    return _ttl_engine().shard_worker.run("sweep").swept_items


class Runnable(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...


def run_until_signalled(runtime: Runnable, ready: Callable[[], None]) -> None:
    """Serve until SIGINT/SIGTERM, then stop within `STOP_GRACE_SECONDS` whatever is running: a stop
    that hangs (a stuck thread, a wedged moto call) ends the process anyway."""
    stop = threading.Event()

    def signalled(*_: object) -> None:
        if not stop.is_set():  # the watchdog starts with the signal, not when the main thread wakes
            watchdog = threading.Timer(STOP_GRACE_SECONDS, _exit_now)
            watchdog.daemon = True
            watchdog.start()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signalled)
    runtime.start()
    ready()
    # Polled: CPython runs signal handlers only in the main thread, and a main thread blocked in an
    # untimed wait can sleep through a signal the kernel handed to another thread (CI saw > 10 s).
    while not stop.wait(0.25):
        pass
    runtime.stop()


def _exit_now() -> None:
    """No logging here: a logging lock held by a stuck thread (or a full stdout pipe) must not keep
    the process alive."""
    os.write(2, f"sluice local did not stop within {STOP_GRACE_SECONDS} s; exiting\n".encode())
    os._exit(1)


def _handler_exists(function: str) -> bool:
    module_name = c.FUNCTION_HANDLERS[function].rpartition(".")[0]
    try:
        return importlib.util.find_spec(module_name) is not None
    except ModuleNotFoundError:
        return False


class _HttpServer(ThreadingHTTPServer):
    """A thread per connection, and the kernel's longest queue of connections not yet accepted:
    socketserver's 5 has the kernel reset those of a burst past it (9 of 20 clients starting at once),
    where API Gateway takes them all."""

    request_queue_size = socket.SOMAXCONN
    daemon_threads = True


def _make_handler(runtime: LocalRuntime) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        """http.server's request parsing, with every refusal answered as API Gateway would (JSON, a
        stable code) instead of its HTML error page or a dropped connection."""

        protocol_version = "HTTP/1.1"
        server_version = "sluice-local"

        def handle_one_request(self) -> None:
            """http.server's loop step, with API Gateway's request-line quota (it allows 64 KiB)."""
            try:
                line = self.rfile.readline(gateway.REQUEST_LINE_AND_HEADERS_BYTES + 1)
            except OSError:  # reset by the client
                self.close_connection = True
                return
            if not line:
                self.close_connection = True
                return
            if len(line) > gateway.REQUEST_LINE_AND_HEADERS_BYTES:
                self.raw_requestline, self.requestline = b"", ""
                self.request_version, self.command = "HTTP/1.1", ""
                self._refuse(errors.GatewayUriTooLong("the request line is over 10,240 bytes"))
                return
            self.raw_requestline = line
            if not self.parse_request():
                return
            self._serve()
            self.wfile.flush()

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """http.server's own refusals (request line, headers): JSON with a code, not HTML."""
            kind = errors.GatewayHeadersTooLarge if code == 431 else errors.GatewayRequestMalformed
            self._refuse(kind(f"malformed HTTP request: {message or explain or code}"))

        def _refuse(self, exc: errors.SluiceError) -> None:
            self.close_connection = True  # the rest of the stream cannot be trusted
            if self.request_version == "HTTP/0.9":  # unparsed request line: still answer with a status line
                self.request_version = "HTTP/1.1"
            self._answer(*gateway.refusal(exc))
            self.wfile.flush()
            self._linger()

        def _linger(self) -> None:
            """Read what the client already sent before closing: closing with unread input makes the
            kernel reset the connection, and the client could lose the answer."""
            self.connection.settimeout(LINGER_SECONDS)
            try:
                for _ in range(LINGER_MAX_READS):
                    if not self.connection.recv(65536):
                        break
            except OSError:
                pass

        def _read_body(self) -> bytes | None:
            """The body per Content-Length (or chunked), or None when the request was refused here."""
            encoding = self.headers.get("Transfer-Encoding")
            if encoding is not None:
                if encoding.strip().lower() != "chunked" or "Content-Length" in self.headers:
                    self._refuse(
                        errors.GatewayRequestMalformed(f"unsupported Transfer-Encoding {encoding!r}")
                    )
                    return None
                return self._read_chunked()
            declared = self.headers.get_all("Content-Length") or []
            if not declared:
                return b""
            if len(set(declared)) > 1 or not declared[0].strip().isdigit():
                self._refuse(
                    errors.GatewayRequestMalformed(f"invalid Content-Length: {', '.join(declared)[:40]!r}")
                )
                return None
            length = int(declared[0])
            if length > gateway.API_GATEWAY_PAYLOAD_BYTES:  # not read at all; 6-10 MB are read, then refused
                self._refuse(
                    errors.GatewayPayloadTooLarge(
                        f"the body ({length} bytes) is over Lambda's 6 MB synchronous invocation limit"
                    )
                )
                return None
            self.connection.settimeout(BODY_READ_TIMEOUT_SECONDS)  # a client that stops mid-body is refused
            try:
                body = self.rfile.read(length)
            except TimeoutError:
                body = b""
            finally:
                self.connection.settimeout(None)
            if len(body) < length:
                self._refuse(
                    errors.GatewayRequestMalformed(
                        f"the body ended after {len(body)} of its {length} bytes (Content-Length)"
                    )
                )
                return None
            return body

        def _read_chunked(self) -> bytes | None:
            """A chunked body, refused if malformed, cut off, or over API Gateway's payload quota."""
            self.connection.settimeout(BODY_READ_TIMEOUT_SECONDS)
            parts: list[bytes] = []
            total = 0
            try:
                while True:
                    size_line = self.rfile.readline(1024).split(b";", 1)[0].strip()
                    size = int(size_line, 16) if size_line and len(size_line) <= 16 else -1
                    if size < 0:
                        raise ValueError("bad chunk size")
                    total += size
                    if total > gateway.API_GATEWAY_PAYLOAD_BYTES:
                        self._refuse(
                            errors.GatewayPayloadTooLarge("the chunked body is over the payload limit")
                        )
                        return None
                    if size == 0:
                        while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return b"".join(parts)
                    chunk = self.rfile.read(size)
                    if len(chunk) < size or self.rfile.readline(3) not in (b"\r\n", b"\n"):
                        raise ValueError("chunk cut off")
                    parts.append(chunk)
            except (ValueError, TimeoutError):
                self._refuse(errors.GatewayRequestMalformed("the chunked body is malformed or cut off"))
                return None
            finally:
                self.connection.settimeout(None)

        def _serve(self) -> None:
            if len(str(self.headers)) + len(self.raw_requestline) > gateway.REQUEST_LINE_AND_HEADERS_BYTES:
                self._refuse(
                    errors.GatewayHeadersTooLarge("the request line and headers are over 10,240 bytes")
                )
                return
            body = self._read_body()
            if body is None:
                return
            path, _, query = self.path.partition("?")
            try:
                status, headers, data = runtime.dispatch(
                    self.command, path, query, list(self.headers.items()), body, self.client_address[0]
                )
            except Exception:  # a bug of the gateway itself: answered as API Gateway answers a failure
                log.exception("integration failed")
                status, headers, data = gateway.INTERNAL_SERVER_ERROR
            self._answer(status, headers, data)

        def _answer(self, status: int, headers: dict[str, str], data: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                if name.lower() not in ("content-length", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            if self.close_connection:
                self.send_header("Connection", "close")
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
