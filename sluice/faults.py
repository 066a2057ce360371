"""Fault injection for tests and benchmarks: named crash points, and failed or delayed AWS calls.

Crash points are no-ops unless a test arms them. `FaultInjector` hooks botocore's event system on
every client the adapters make (`sluice.adapters.aws.instrument`) and fails or delays a chosen
fraction of DynamoDB and S3 calls, in the two ways a real dependency fails:

- **not applied** (`before-send`): the request never reaches the service and the answer is an
  error response (DynamoDB `ThrottlingException` or `InternalServerError`, S3 `SlowDown` or
  `InternalError`). botocore's retry policy sees it exactly as it sees the real thing and retries.
- **applied** (`after-call`): the call reached the service and changed it, then the caller got an
  error anyway (a lost response). botocore does not retry it; the engine sees a `ClientError` after
  its write happened, the ambiguous case that idempotence and conditions must cover.
"""

from __future__ import annotations

import io
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self

_armed: set[str] = set()

# Named crash points (docs/design.md "Fault points" lists where each is placed).
PUBLISH_AFTER_ALLOCATE = "publish.after_allocate"  # between the head allocation and the batch put
TIER_AFTER_PUT = "tier.after_put"  # between a payload-tier object's S3 PUT and its index items' write
PUBLISH_AFTER_WRITE = "publish.after_write"  # between the last batch item write and the send's answer
DLQ_AFTER_WRITE = "dlq.after_write"  # between the DLQ publish and the state commit that drops it
REDRIVE_AFTER_WRITE = "redrive.after_write"  # between the publish to the source and the DLQ ack
SEGMENT_AFTER_UPLOAD = "segment.after_upload"  # between the S3 segment upload and its index commit
COORDINATOR_AFTER_MAP_WRITE = "coordinator.after_map_write"  # between the map write and the SSM mirror
CRASH_POINTS = (
    PUBLISH_AFTER_ALLOCATE,
    TIER_AFTER_PUT,
    PUBLISH_AFTER_WRITE,
    DLQ_AFTER_WRITE,
    REDRIVE_AFTER_WRITE,
    SEGMENT_AFTER_UPLOAD,
    COORDINATOR_AFTER_MAP_WRITE,
)


class InjectedCrash(BaseException):
    """Simulates the process dying at a crash point."""


def crash_point(name: str) -> None:
    if name in _armed:
        raise InjectedCrash(name)


@contextmanager
def armed(name: str) -> Iterator[None]:
    _armed.add(name)
    try:
        yield
    finally:
        _armed.discard(name)


# --- AWS call faults -----------------------------------------------------------------------------------

# (status, error code) per service: the throttling answer and the server-error answer.
_ERRORS: dict[str, tuple[tuple[int, str], tuple[int, str]]] = {
    "dynamodb": ((400, "ThrottlingException"), (500, "InternalServerError")),
    "s3": ((503, "SlowDown"), (500, "InternalError")),
    "ssm": ((400, "ThrottlingException"), (500, "InternalServerError")),
}
_NOWHERE = "http://sluice-injected-fault.invalid/"  # no stub (moto) and no socket ever serves this


class _Raw(io.BytesIO):
    """The raw-stream shape botocore reads response bodies from."""

    def stream(self, **_kwargs: Any) -> Iterator[bytes]:
        chunk = self.read()
        while chunk:
            yield chunk
            chunk = self.read()


def _error_body(service: str, code: str) -> tuple[dict[str, str], bytes]:
    message = "injected fault"
    if service == "s3":
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
        )
        body += "</Error>"
        return {"Content-Type": "application/xml"}, body.encode()
    prefix = "com.amazonaws.dynamodb.v20120810#" if service == "dynamodb" else ""
    doc = {"__type": prefix + code, "message": message}
    return {"Content-Type": "application/x-amz-json-1.0"}, json.dumps(doc).encode()


class _ClientHooks:
    """Hooks on every AWS client of the process (`sluice.adapters.aws.instrument`), present and future,
    removed again by `stop`. Subclasses register in `attach` and unregister in `detach`."""

    def __init__(self) -> None:
        self._attached: list[Any] = []
        self._stop: Callable[[], None] | None = None
        # Set by `stop`: a client a thread was making while it stopped may keep the hooks (attached
        # after the detach loop); they must do nothing then, or a later test's calls fail.
        self.stopped = False

    def start(self) -> Self:
        from sluice.adapters import aws

        self.stopped = False
        self._stop = aws.instrument(self.attach)
        return self

    def stop(self) -> None:
        self.stopped = True
        if self._stop:
            self._stop()
            self._stop = None
        for client in self._attached:
            self.detach(client)
        self._attached.clear()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def attach(self, client: Any) -> None:
        raise NotImplementedError

    def detach(self, client: Any) -> None:
        raise NotImplementedError


class FaultInjector(_ClientHooks):
    """Fail or delay a fraction of the AWS calls of chosen services.

    `fraction` of matching calls fail; of those, `applied_share` fail *after* the call took effect
    (the rest never reach the service and are retried by botocore). With `delay_ms`, a further
    `delay_fraction` (default: `fraction`) of calls are delayed that long. `throttle_share` of
    not-applied failures look like throttling, the rest like a 5xx. `operations` limits faults to
    those botocore operation names. Seeded: a run's faults are reproducible for one call order.

        with FaultInjector(0.10, seed=7) as faults:
            ...
        faults.counts  # Counter of (service, operation, kind)
    """

    def __init__(
        self,
        fraction: float,
        services: Sequence[str] = ("dynamodb", "s3"),
        delay_ms: float = 0.0,
        seed: int | None = None,
        *,
        delay_fraction: float | None = None,
        applied_share: float = 0.25,
        throttle_share: float = 0.5,
        operations: Sequence[str] | None = None,
    ) -> None:
        if not 0.0 <= fraction <= 1.0:
            raise ValueError("fraction must be between 0 and 1")
        self.fraction = fraction
        self.services = tuple(services)
        self.delay_ms = delay_ms
        self.delay_fraction = fraction if delay_fraction is None else delay_fraction
        self.applied_share = applied_share
        self.throttle_share = throttle_share
        self.operations = frozenset(operations) if operations else None
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._local = threading.local()  # per thread: the call in flight must fail once applied
        super().__init__()

    # --- lifecycle ------------------------------------------------------------------------------------

    def detach(self, client: Any) -> None:
        events = client.meta.events
        for service in self.services:
            events.unregister(f"before-send.{service}", unique_id=f"sluice-fault-send-{id(self)}")
            events.unregister(f"after-call.{service}", unique_id=f"sluice-fault-after-{id(self)}")

    def attach(self, client: Any) -> None:
        """Register on one botocore client's event system (ahead of moto's in-process stub)."""
        service = client.meta.service_model.service_id.hyphenize()
        if service not in self.services:
            return
        events = client.meta.events
        events.register_first(
            f"before-send.{service}", self._before_send, unique_id=f"sluice-fault-send-{id(self)}"
        )
        events.register_first(
            f"after-call.{service}", self._after_call, unique_id=f"sluice-fault-after-{id(self)}"
        )
        self._attached.append(client)

    @property
    def injected(self) -> int:
        return sum(n for (_s, _o, kind), n in self.counts.items() if kind != "delay")

    # --- the hooks ------------------------------------------------------------------------------------

    def _roll(self) -> float:
        with self._lock:
            return self._rng.random()

    def _count(self, service: str, operation: str, kind: str) -> None:
        with self._lock:
            self.counts[(service, operation, kind)] += 1

    def _before_send(self, request: Any, event_name: str, **_kwargs: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        _, service, operation = event_name.split(".", 2)
        if self.stopped or (self.operations is not None and operation not in self.operations):
            return None
        roll = self._roll()
        if roll < self.fraction:
            if roll < self.fraction * self.applied_share:
                # Let it through; fail it once it has been applied (after-call, same thread).
                self._mark_after()
                return None
            throttle = roll < self.fraction * (
                self.applied_share + (1 - self.applied_share) * self.throttle_share
            )
            status, code = _ERRORS.get(service, _ERRORS["dynamodb"])[0 if throttle else 1]
            self._count(service, operation, code)
            headers, body = _error_body(service, code)
            request.url = _NOWHERE  # later before-send handlers (moto's stub) must not apply it
            return AWSResponse(_NOWHERE, status, headers, _Raw(body))
        if self.delay_ms and roll < self.fraction + self.delay_fraction:
            self._count(service, operation, "delay")
            time.sleep(self.delay_ms / 1000)
        return None

    def _mark_after(self) -> None:
        self._local.fail_after = True

    def _after_call(self, event_name: str, **_kwargs: Any) -> None:
        from botocore.exceptions import ClientError

        if not getattr(self._local, "fail_after", False):
            return
        self._local.fail_after = False
        if self.stopped:
            return
        _, service, operation = event_name.split(".", 2)
        code = _ERRORS.get(service, _ERRORS["dynamodb"])[1][1]
        self._count(service, operation, f"{code}-after-apply")
        raise ClientError(
            {
                "Error": {"Code": code, "Message": "injected fault after the call was applied"},
                "ResponseMetadata": {"HTTPStatusCode": 500},
            },
            operation,
        )


class RegionOutage(_ClientHooks):
    """Make every AWS call to the regions in `down` fail as an unreachable endpoint does
    (`EndpointConnectionError`, before anything is sent), until they are taken out of it again.
    Attached like `FaultInjector` (`sluice.adapters.aws.instrument`), to clients of every service.

        with RegionOutage() as outage:
            outage.down.add("eu-west-1")
            ...
        outage.refused  # Counter of region -> calls refused
    """

    def __init__(self) -> None:
        self.down: set[str] = set()
        self.refused: Counter[str] = Counter()
        self._lock = threading.Lock()
        super().__init__()

    def detach(self, client: Any) -> None:
        client.meta.events.unregister("before-send", unique_id=f"sluice-outage-{id(self)}")

    def attach(self, client: Any) -> None:
        region = client.meta.region_name

        def refuse(request: Any, **_kwargs: Any) -> None:
            from botocore.exceptions import EndpointConnectionError

            if region in self.down and not self.stopped:
                with self._lock:
                    self.refused[region] += 1
                raise EndpointConnectionError(endpoint_url=request.url)

        client.meta.events.register_first("before-send", refuse, unique_id=f"sluice-outage-{id(self)}")
        self._attached.append(client)
