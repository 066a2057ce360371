"""Lambda containers for the local runtime: each worker process imports a handler and runs one event
at a time, as a Lambda container does (Powertools resolvers keep per-request state on the app).

A container that dies (SIGKILL, a crash) or runs past its function timeout (a hang, SIGSTOP) is
discarded, as Lambda discards an execution environment, and the next invocation starts a new one:
one bad container never takes the function down.

A container is given the function's MemorySize, as Lambda gives it: one whose memory (the process's
peak resident set, the figure Lambda's `Max Memory Used` reports) passes it is killed mid-invocation
(`Runtime exited with error: signal: killed`) and replaced, so a handler that holds too much fails here
as it would deployed, not only on AWS.

A function with SnapStart, invoked through its alias (the API's routes), starts as Lambda resumes it
from a snapshot: init (the handler's import), then the before-snapshot and after-restore hooks
(`lambdas.common.snapstart`), then the first event; so do the coordinator's push invocations of
`consumer:live`. Invoked unqualified ($LATEST) it starts plainly, as on Lambda, where $LATEST never
uses the snapshot.
"""

from __future__ import annotations

import importlib
import logging
import os
import resource
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.connection import Connection
from typing import Any

from lambdas.common import snapstart
from sluice.constants import FUNCTION_HANDLERS
from sluice.local import callaudit, interregion

INTEGRATION_TIMEOUT_SECONDS = 30.0  # API Gateway HTTP API's integration timeout (not adjustable)
LAMBDA_DEFAULT_TIMEOUT_SECONDS = 3  # what Lambda applies when a function sets no Timeout
LAMBDA_DEFAULT_MEMORY_MB = 128
LAMBDA_DEFAULT_MAX_EVENT_AGE_SECONDS = 6 * 3600.0  # an async event's wait without an EventInvokeConfig
COLD_START_LIMIT_SECONDS = 60.0  # a container that cannot import its handler in this time is broken
MEMORY_CHECK_SECONDS = 0.02  # how often a container's memory is compared with its MemorySize
DELIVERY_ATTEMPTS = 2  # containers tried for one event that none has received yet
_MP = get_context("spawn")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FunctionConfig:
    """What the template says about one function (see `sluice.local.template.functions_from_template`)."""

    timeout_seconds: float = 30.0
    memory_mb: int = 512
    reserved_concurrency: int | None = None
    snap_start: bool = False  # SnapStart on published versions
    alias: str | None = None  # what the invocations name (None: $LATEST)
    # An async event not yet running this long after it was queued is dropped, as Lambda drops it.
    max_event_age_seconds: float = LAMBDA_DEFAULT_MAX_EVENT_AGE_SECONDS

    @classmethod
    def from_properties(cls, props: dict[str, Any]) -> FunctionConfig:
        """From an `AWS::Lambda::Function`'s Properties; absent values take Lambda's defaults."""
        reserved = props.get("ReservedConcurrentExecutions")
        return cls(
            timeout_seconds=float(props.get("Timeout", LAMBDA_DEFAULT_TIMEOUT_SECONDS)),
            memory_mb=int(props.get("MemorySize", LAMBDA_DEFAULT_MEMORY_MB)),
            reserved_concurrency=None if reserved is None else int(reserved),
            snap_start=props.get("SnapStart", {}).get("ApplyOn") == "PublishedVersions",
        )

    @property
    def restores_from_snapshot(self) -> bool:
        """Lambda resumes a new environment from the snapshot only for a published version (an alias)."""
        return self.snap_start and self.alias is not None


class InvocationFailed(RuntimeError):
    """The function did not return a result: Lambda reports a function error (API Gateway: 500)."""


class ContainerCrashed(InvocationFailed):
    """The container process died during the invocation (Lambda: `Runtime.ExitError`)."""


class FunctionOutOfMemory(ContainerCrashed):
    """The container used more memory than the function's MemorySize and was killed, as Lambda kills it."""


class FunctionTimedOut(InvocationFailed):
    """The invocation ran past the function's timeout; its container was killed (`Task timed out`)."""


class EventExpired(InvocationFailed):
    """An asynchronous event waited past the function's maximum event age and was dropped unrun."""


class InvocationThrottled(InvocationFailed):
    """Lambda refused the invocation: every execution the function reserves is in use
    (`TooManyRequestsException`; API Gateway answers its own 500, as for a function error)."""


class IntegrationTimedOut(RuntimeError):
    """No answer within API Gateway's integration timeout (HTTP API: 503); the function may still run."""


class LocalContext:
    """The parts of the Lambda context object that Powertools and the handlers read."""

    function_version = "$LATEST"
    log_group_name = "/aws/lambda/local"
    log_stream_name = "local"

    def __init__(
        self, function: str, timeout_seconds: float, memory_mb: int = 512, alias: str | None = None
    ) -> None:
        self.function_name = f"sluice-local-{function}"
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"
        if alias:
            self.invoked_function_arn += f":{alias}"
        self.memory_limit_in_mb = memory_mb
        self.aws_request_id = uuid.uuid4().hex
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _handler(function: str) -> Any:
    module_name, _, attr = FUNCTION_HANDLERS[function].rpartition(".")
    return getattr(importlib.import_module(module_name), attr)


def invoke(function: str, event: dict[str, Any], config: FunctionConfig | None = None) -> Any:
    """Run the handler in this process (no container): for tools and tests."""
    config = config or FunctionConfig()
    callaudit.install_from_env()  # tests record this function's AWS calls for the IAM audit
    with callaudit.attributed(function):
        return _handler(function)(event, LocalContext(function, config.timeout_seconds, config.memory_mb))


def peak_memory_mb() -> float:
    """This process's own peak resident set so far, in MB. Linux: `VmHWM`, which starts again at exec.
    Elsewhere `ru_maxrss` (KiB, bytes on macOS), which also counts the process a container was forked
    from before its exec: a container's own peak is only seen once it passes that one."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


class _MemoryLimit:
    """Kills the container once its peak memory passes `limit_mb`, telling the runtime why first.

    It looks only while an invocation (or the cold start) runs, every `MEMORY_CHECK_SECONDS`, and once
    more as the result is sent: the peak is a high-water mark, so a spike shorter than one check still
    fails its invocation, and an idle container costs nothing. Every message to the runtime takes one
    lock, so the report never splits another message or follows the invocation's result."""

    def __init__(self, conn: Connection, limit_mb: int) -> None:
        self.conn = conn
        self.limit_mb = limit_mb
        self.sending = threading.Lock()
        self.busy = threading.Event()  # an invocation is running: its caller waits for a message

    def start(self) -> None:
        threading.Thread(target=self._watch, name="memory-limit", daemon=True).start()

    def send(self, message: tuple[str, Any], *, done: bool = False) -> None:
        with self.sending:
            if done:
                self._enforce()
                self.busy.clear()
            self.conn.send(message)

    def _enforce(self) -> None:
        """Under `sending`, while busy: past the limit, report it and die (Lambda's SIGKILL)."""
        used = peak_memory_mb()
        if used > self.limit_mb:
            self.conn.send(("oom", f"used {used:.1f} MB, past its {self.limit_mb} MB"))
            os.kill(os.getpid(), signal.SIGKILL)

    def _watch(self) -> None:
        while self.busy.wait():
            with self.sending:
                if self.busy.is_set():
                    self._enforce()
            time.sleep(MEMORY_CHECK_SECONDS)


def _container_main(conn: Connection, function: str, env: dict[str, str], config: FunctionConfig) -> None:
    """The container's loop: import once (the cold start), then one event at a time until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the runtime stops us
    memory = _MemoryLimit(conn, config.memory_mb)
    memory.busy.set()  # the cold start counts, as Lambda's init phase does
    memory.start()
    os.environ.update(env)
    os.environ["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = str(config.memory_mb)
    if config.restores_from_snapshot:
        os.environ["AWS_LAMBDA_INITIALIZATION_TYPE"] = "snap-start"  # as Lambda sets it
    callaudit.install_from_env()  # tests record this function's AWS calls for the IAM audit
    interregion.install_from_env()  # a multi-region `sluice local`: other regions are far, or down
    handler = _handler(function)
    restored = snapstart.snapshot_and_restore() if config.restores_from_snapshot else None
    memory.send(("ready", restored), done=True)
    while True:
        try:
            event = conn.recv()
        except EOFError:
            return
        if event is None:
            return
        memory.busy.set()
        context = LocalContext(function, config.timeout_seconds, config.memory_mb, config.alias)
        try:
            with callaudit.attributed(function):
                result = handler(event, context)
            memory.send(("ok", result), done=True)
        except Exception as exc:  # a function error: Lambda returns it to the caller, the container lives on
            memory.send(("error", f"{type(exc).__name__}: {exc}"), done=True)


class Container:
    """One execution environment: a process and the pipe the runtime talks to it over."""

    def __init__(self, function: str, env: dict[str, str], config: FunctionConfig) -> None:
        self.conn, child = _MP.Pipe()
        self.process = _MP.Process(
            target=_container_main,
            args=(child, function, env, config),
            name=f"sluice-{function}",
            daemon=True,
        )
        self.process.start()
        child.close()  # so the parent sees EOF the moment the container dies
        self.ready = False
        self.restore_hooks: list[str] | None = None  # after-restore hooks run (None: not restored)

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def wait_ready(self, timeout: float) -> None:
        if self.ready:
            return
        if not self.conn.poll(timeout):
            raise FunctionTimedOut("the container did not start in time")
        try:
            kind, value = self.conn.recv()
        except (EOFError, OSError) as exc:
            raise ContainerCrashed(f"the container exited during its cold start: {exc!r}") from exc
        if kind == "oom":
            raise FunctionOutOfMemory(f"Runtime exited with error: signal: killed (during init: {value})")
        self.restore_hooks = value
        self.ready = True

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(2)
        self.conn.close()


class FunctionPool:
    """Up to `concurrency` containers of one function, started on demand and replaced when lost.

    `invoke` is a synchronous (RequestResponse) invocation; `submit` an asynchronous one (Event). When
    the template's reserved concurrency is what caps the pool (not the laptop's `concurrency`), an
    invocation with `refuse_when_full` finds every reserved execution busy and is refused at once, as
    Lambda refuses it; otherwise it waits for a container (a laptop limit, not Lambda's)."""

    def __init__(
        self, function: str, concurrency: int, env: dict[str, str], config: FunctionConfig | None = None
    ) -> None:
        self.function = function
        self.config = config or FunctionConfig()
        reserved = self.config.reserved_concurrency
        self.reservation_binds = reserved is not None and reserved <= concurrency
        if reserved is not None:
            concurrency = min(concurrency, reserved)
        self.concurrency = max(1, concurrency)
        self._env = env
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._lock = threading.Lock()
        self._idle: list[Container] = []
        self._busy: set[Container] = set()
        self._closed = False
        self._async: ThreadPoolExecutor | None = None
        self.replaced = 0  # containers discarded after a crash or a timeout
        self.expired = 0  # async events dropped unrun: older than `config.max_event_age_seconds`

    def restore_hooks(self) -> list[list[str] | None]:
        """The after-restore hooks each started container ran (None: it did not restore)."""
        with self._lock:
            return [c.restore_hooks for c in [*self._idle, *self._busy] if c.ready]

    def pids(self) -> list[int]:
        """Process ids of the live containers (for fault tests)."""
        with self._lock:
            return [p.pid for p in [*self._idle, *self._busy] if p.pid is not None]

    def warm(self) -> None:
        """Start one container now, so the first request does not pay for the cold start."""
        with self._slots_taken(COLD_START_LIMIT_SECONDS):
            container = self._take()
            try:
                container.wait_ready(COLD_START_LIMIT_SECONDS)
            except InvocationFailed:
                self._discard(container)
                raise
            self._give_back(container)

    def invoke(
        self, event: dict[str, Any], wait_seconds: float | None = None, refuse_when_full: bool = False
    ) -> Any:
        """The function's result, or `InvocationFailed` (function error, crash, timeout). With
        `wait_seconds` (API Gateway's integration timeout) the caller stops waiting then with
        `IntegrationTimedOut`, while the invocation runs on to its own timeout as in Lambda."""
        refusing = refuse_when_full and self.reservation_binds
        if wait_seconds is None:
            return self._run(event, refusing)
        done = threading.Event()
        outcome: list[tuple[bool, Any]] = []

        def run() -> None:
            try:
                outcome.append((True, self._run(event, refusing)))
            except BaseException as exc:
                outcome.append((False, exc))
            done.set()

        threading.Thread(target=run, name=f"invoke-{self.function}", daemon=True).start()
        if not done.wait(wait_seconds):
            raise IntegrationTimedOut(f"{self.function} did not answer within {wait_seconds:g} s")
        ok, value = outcome[0]
        if ok:
            return value
        raise value

    def submit(self, event: dict[str, Any]) -> None:
        """Run `event` without waiting for it (asynchronous invocation); failures are logged. An event
        still waiting for a container after the maximum event age is dropped, never run late."""
        expires_at = time.monotonic() + self.config.max_event_age_seconds
        with self._lock:
            if self._closed:
                return
            if self._async is None:
                self._async = ThreadPoolExecutor(
                    self.concurrency, thread_name_prefix=f"async-{self.function}"
                )
            self._async.submit(self._run_logged, event, expires_at)

    def _run_logged(self, event: dict[str, Any], expires_at: float) -> None:
        try:
            self._run(event, expires_at=expires_at)
        except EventExpired as exc:
            with self._lock:
                self.expired += 1
            log.warning("%s", exc)
        except InvocationFailed as exc:
            if not self._closed:
                log.warning("async invocation of %s failed: %s", self.function, exc)

    def _run(self, event: dict[str, Any], refusing: bool = False, expires_at: float | None = None) -> Any:
        """`refusing`: take a free slot now or raise `InvocationThrottled` (else wait for one).
        `expires_at` (monotonic): raise `EventExpired` instead of running once the slot comes later."""
        with self._slots_taken(0, InvocationThrottled) if refusing else self._slots_taken(None):
            if expires_at is not None and time.monotonic() > expires_at:
                raise EventExpired(
                    f"{self.function}: async event dropped unrun after waiting past its maximum event age "
                    f"({self.config.max_event_age_seconds:g} s)"
                )
            container = self._deliver(event)
            try:
                if not container.conn.poll(self.config.timeout_seconds):
                    raise FunctionTimedOut(
                        f"{self.function}: task timed out after {self.config.timeout_seconds:g} seconds"
                    )
                kind, value = container.conn.recv()
            except (EOFError, OSError) as exc:
                self._discard(container)
                raise ContainerCrashed(f"{self.function}: the container exited ({exc!r})") from exc
            except InvocationFailed:
                self._discard(container)
                raise
            if kind == "oom":
                self._discard(container)
                raise FunctionOutOfMemory(
                    f"{self.function}: Runtime exited with error: signal: killed ({value})"
                )
            self._give_back(container)
        if kind == "error":
            raise InvocationFailed(f"{self.function}: {value}")
        return value

    def _deliver(self, event: dict[str, Any]) -> Container:
        """A container that has received `event`. One that died before getting it (killed while idle,
        or during its cold start) never ran it, so a fresh container takes the event instead."""
        for attempt in range(DELIVERY_ATTEMPTS):
            container = self._take()
            try:
                container.wait_ready(COLD_START_LIMIT_SECONDS)
                container.conn.send(event)
                return container
            except (EOFError, OSError, ContainerCrashed) as exc:
                self._discard(container)
                if attempt == DELIVERY_ATTEMPTS - 1:
                    raise ContainerCrashed(f"{self.function}: no container took the event ({exc!r})") from exc
            except InvocationFailed:
                self._discard(container)
                raise
        raise AssertionError("unreachable")

    @contextmanager
    def _slots_taken(
        self, timeout: float | None, refused: type[InvocationFailed] = FunctionTimedOut
    ) -> Iterator[None]:
        """One of the function's `concurrency` slots (a busy or idle container)."""
        if not self._slots.acquire(timeout=timeout):
            raise refused(f"{self.function}: no container free")
        try:
            yield
        finally:
            self._slots.release()

    def _take(self) -> Container:
        with self._lock:
            if self._closed:
                raise ContainerCrashed(f"{self.function}: the runtime is stopping")
            container = self._idle.pop() if self._idle else None
        if container is None or not container.process.is_alive():
            if container is not None:
                self._discard(container)
            container = Container(self.function, self._env, self.config)
        with self._lock:
            self._busy.add(container)
            closed = self._closed
        if closed:
            self._discard(container)
            raise ContainerCrashed(f"{self.function}: the runtime is stopping")
        return container

    def _give_back(self, container: Container) -> None:
        with self._lock:
            self._busy.discard(container)
            if not self._closed:
                self._idle.append(container)
                return
        container.kill()

    def _discard(self, container: Container) -> None:
        with self._lock:
            self._busy.discard(container)
            if container in self._idle:
                self._idle.remove(container)
            if not self._closed:
                self.replaced += 1
        container.kill()
        if not self._closed:
            log.warning(
                "%s: container %s discarded; the next invocation starts a new one",
                self.function,
                container.pid,
            )

    def close(self) -> None:
        """Kill every container at once, busy or not: stopping never waits for a running invocation."""
        with self._lock:
            self._closed = True
            containers = [*self._idle, *self._busy]
            self._idle.clear()
            self._busy.clear()
            executor = self._async
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        for container in containers:
            if container.process.is_alive():
                container.process.kill()
        for container in containers:
            container.process.join(2)
