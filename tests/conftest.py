"""Shared fixtures: one in-process moto for the session, resources provisioned once, isolation by
unique queue names (moto slows down as tables grow, so each test keeps its queues small)."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice import constants as c
from sluice.local import callaudit
from sluice.local.runtime import LOCAL_AWS_ENV

os.environ.update(LOCAL_AWS_ENV)
os.environ.setdefault("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

ADMIN_TOKEN = "test-admin-token"


# -- IAM call audit ---------------------------------------------------------------------------------
# Every AWS call a handler makes during the session (in-process, in the local runtime's worker
# processes and in the `sluice local` subprocess) is recorded as (function, IAM action, resource ARN);
# at the end, each is checked against that function's role in the synthesized template, and a call
# the deployed role would deny fails the session (sluice/local/iamcheck.py). Under `make test` (the whole
# suite, SLUICE_IAM_UNUSED_CHECK=1) a granted action no call used fails it too.


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get(c.ENV_IAM_AUDIT_FILE):
        fd, path = tempfile.mkstemp(prefix="sluice-iam-audit-", suffix=".jsonl")
        os.close(fd)
        os.environ[c.ENV_IAM_AUDIT_FILE] = path
    callaudit.install_from_env()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from sluice.local import iamcheck

    path = Path(os.environ[c.ENV_IAM_AUDIT_FILE])
    calls = iamcheck.load_calls(path) if path.is_file() else []
    if not calls:
        return
    denials = iamcheck.check(calls, iamcheck.template_for_stage)
    text = iamcheck.report(calls, denials)
    failed = bool(denials)
    # The whole suite (`make test` sets it): a role may hold only actions some call used, or an
    # allow-list entry explains (sluice/local/iamcheck.py UNEXERCISED); a partial run cannot judge that.
    if os.environ.get(c.ENV_IAM_UNUSED_CHECK):
        unexplained, stale = iamcheck.unused(calls, iamcheck.template_for_stage)
        text += "\n" + iamcheck.unused_report(unexplained, stale)
        failed = failed or bool(unexplained or stale)
    session.config.stash[_AUDIT_REPORT] = text
    if failed:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    for title, lines in config.stash.get(REPORTS, {}).items():
        terminalreporter.write_sep("-", title)
        for line in lines:
            terminalreporter.write_line(line)
    text = config.stash.get(_AUDIT_REPORT, None)
    if text:
        terminalreporter.write_sep("-", "IAM call audit")
        terminalreporter.write_line(text)


_AUDIT_REPORT = pytest.StashKey[str]()
# Figures a test wants in CI's output even when it passes (title -> lines), printed at the end.
REPORTS = pytest.StashKey[dict[str, list[str]]]()


def report(config: pytest.Config, title: str, line: str) -> None:
    config.stash.setdefault(REPORTS, {}).setdefault(title, []).append(line)


@pytest.fixture(scope="session")
def aws() -> Iterator[None]:
    from moto import mock_aws

    from sluice.local import moto_patches

    moto_patches.apply()
    with mock_aws():
        yield


@pytest.fixture(autouse=True)
def _ssm_quota() -> None:
    """Each test starts with a full second of the account's SSM quota (sluice/local/moto_patches.py:
    40 reads and 3 PutParameter a second): tests share one moto account, and a test that writes a
    mirror itself must not find the quota spent by the queues the test before it created."""
    from sluice.local import moto_patches

    moto_patches.refill_ssm_quota()


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
