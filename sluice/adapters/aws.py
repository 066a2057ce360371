"""AWS clients with one retry policy, pointed at moto when the local runtime says so.

Clients come from a botocore session, not boto3: they are the same client objects, but `import boto3`
also imports s3transfer and boto3's resource layer (≈ 0.3 s of a cold start, `make bench`), which
nothing here uses. A SnapStart restore drops every cached client (`reset_clients`, registered in
`lambdas/common/restore.py`): their connections and credentials belong to the snapshotted environment.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import botocore.session
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from sluice import errors

# Adaptive retries smooth DynamoDB throttling; timeouts stay short so a Lambda never hangs on one call.
# Six attempts in all (the first and five retries), said as botocore keeps it: a client built with
# `max_attempts` rewrites the shared config's dict to `total_max_attempts`, so readers of the key broke
# depending on whether a client had been built first.
RETRY_CONFIG = Config(
    retries={"total_max_attempts": 6, "mode": "adaptive"},
    connect_timeout=2,
    read_timeout=10,
    max_pool_connections=50,
    tcp_keepalive=True,
)
# Another region's clients (a multi-region deployment): a region that is down, or that accepts connections
# and then hangs, must cost a call little and a bounded time, so the engine's per-region breaker
# (sluice/engine/regions.py) skips it and answers from the others. One attempt (the breaker and the
# caller's next poll are the retry) of at most REMOTE_CALL_SECONDS: before, 2 attempts of up to 1 + 5 s
# with backoff between made a hanging region cost ~12 s a call, and a 20 s long pull end past the 29 s
# function timeout. A cross-region DynamoDB call takes 60-250 ms, far inside the read timeout.
REMOTE_CONNECT_SECONDS = 1.0
REMOTE_READ_SECONDS = 2.0
REMOTE_CALL_SECONDS = REMOTE_CONNECT_SECONDS + REMOTE_READ_SECONDS
REMOTE_CONFIG = Config(
    retries={"total_max_attempts": 1, "mode": "standard"},
    connect_timeout=REMOTE_CONNECT_SECONDS,
    read_timeout=REMOTE_READ_SECONDS,
    max_pool_connections=50,
    tcp_keepalive=True,
)

# Calls with a better way out than waiting (an SSM read the control item can answer, a send another
# shard can take): no retry, so a throttle costs milliseconds, not the seconds of RETRY_CONFIG's backoff.
FAIL_FAST_CONFIG = Config(
    retries={"total_max_attempts": 1, "mode": "standard"},
    connect_timeout=2,
    read_timeout=10,
    max_pool_connections=50,
    tcp_keepalive=True,
)

_THROTTLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "SlowDown",
        "TooManyRequestsException",
    }
)
_UNAVAILABLE_CODES = frozenset({"InternalServerError", "ServiceUnavailable", "InternalError", "503"})

_lock = threading.Lock()
_clients: dict[tuple[str, str | None, str | None, bool], Any] = {}
_session: botocore.session.Session | None = None
_instruments: list[Callable[[Any], None]] = []  # fault injection and call accounting (tests, bench)


def client(
    service: str, endpoint_url: str | None = None, region: str | None = None, *, fail_fast: bool = False
) -> Any:
    """A cached, thread-safe client per (service, endpoint, region): created once per Lambda container.
    `region` None: the process's own region (AWS_DEFAULT_REGION); a multi-region deployment names the
    others, and a region other than the process's own gets `REMOTE_CONFIG`. `fail_fast`: no retry
    (`FAIL_FAST_CONFIG`), for calls the caller can answer another way."""
    key = (service, endpoint_url, region, fail_fast)
    with _lock:
        if key not in _clients:
            global _session
            _session = _session or botocore.session.get_session()
            config = config_for(_session, region)
            if fail_fast and config is RETRY_CONFIG:
                config = FAIL_FAST_CONFIG
            _clients[key] = _session.create_client(
                service, region_name=region, endpoint_url=endpoint_url, config=config
            )
            for attach in _instruments:
                attach(_clients[key])
        return _clients[key]


def config_for(session: botocore.session.Session, region: str | None) -> Config:
    """`RETRY_CONFIG` for the process's own region (None, or the session's: AWS_DEFAULT_REGION, which
    Lambda and `sluice local` set), `REMOTE_CONFIG` for any other."""
    own = session.get_config_variable("region")
    return RETRY_CONFIG if region is None or region == own else REMOTE_CONFIG


def instrument(attach: Callable[[Any], None]) -> Callable[[], None]:
    """Call `attach(client)` on every cached client and every client made later (it registers botocore
    event handlers: `sluice.faults.FaultInjector`, `bench.accounting`). Returns a function that stops
    applying it to new clients; the attacher unregisters its own handlers."""
    with _lock:
        _instruments.append(attach)
        existing = list(_clients.values())
    for made in existing:
        attach(made)

    def stop() -> None:
        with _lock:
            if attach in _instruments:
                _instruments.remove(attach)

    return stop


def reset_clients() -> None:
    """Forget cached clients and the session (its credentials): tests that swap endpoints or
    credentials, and every environment restored from a SnapStart snapshot."""
    global _session
    with _lock:
        _clients.clear()
        _session = None


def error_code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


@contextmanager
def translated(what: str) -> Iterator[None]:
    """Turn throttling and outages into domain errors by AWS error code; let the rest through."""
    try:
        yield
    except ClientError as exc:
        code = error_code(exc)
        if code in _THROTTLE_CODES:
            raise errors.Throttled(f"{what} is throttled; retry after a short pause") from exc
        if code in _UNAVAILABLE_CODES:
            raise errors.DependencyUnavailable(f"{what} is unavailable; retry shortly") from exc
        raise
    except BotoCoreError as exc:
        raise errors.DependencyUnavailable(f"{what} could not be reached; retry shortly") from exc
