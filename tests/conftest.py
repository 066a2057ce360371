"""Shared fixtures: one in-process moto for the session, resources provisioned once, isolation by
unique queue names (moto slows down as tables grow, so each test keeps its queues small)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sluice.local.runtime import LOCAL_AWS_ENV

os.environ.update(LOCAL_AWS_ENV)
os.environ.setdefault("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

ADMIN_TOKEN = "test-admin-token"


@pytest.fixture(scope="session")
def aws() -> Iterator[None]:
    from moto import mock_aws

    from sluice.local import moto_patches

    moto_patches.apply()
    with mock_aws():
        yield


@pytest.fixture(scope="session")
def settings(aws: None):
    """The stack's resources on moto; exported to the environment the handlers read."""
    from sluice.local.provision import provision
    from sluice.settings import get_settings

    provisioned = provision(None, "test")
    os.environ.update(provisioned.to_env())
    get_settings.cache_clear()
    return provisioned


@pytest.fixture(scope="session")
def engine(settings):
    from sluice.service import Sluice

    sluice = Sluice.from_settings(settings)
    sluice.tokens.create("*", ["admin"], token=ADMIN_TOKEN)
    return sluice


@pytest.fixture
def queue_name() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"


class FakeClock:
    """Milliseconds that tests move by hand: visibility timeouts and delays without sleeping."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def clocked(settings, clock: FakeClock):
    """An engine whose time is the fake clock."""
    from sluice.service import Sluice

    return Sluice.from_settings(settings, clock=clock)


class Api:
    """Calls the real Lambda handlers in-process with API Gateway v2 events built as the gateway does."""

    def __call__(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = ADMIN_TOKEN,
        query: str = "",
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        from sluice.local import gateway
        from sluice.local.workers import invoke

        found = gateway.match(method, path)
        assert found is not None, f"no route for {method} {path}"
        route, params = found
        all_headers = [("content-type", "application/json"), *(headers or {}).items()]
        if token is not None:
            all_headers.append(("authorization", f"Bearer {token}"))
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        event = gateway.build_event(route, params, method, path, query, all_headers, data)
        status, _headers, _cookies, out = gateway.unpack_response(invoke(route.function, event))
        return status, json.loads(out) if out else None


@pytest.fixture
def api(engine) -> Api:
    return Api()
