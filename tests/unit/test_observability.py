"""One observability module: engine log lines (stdlib `logging`, no Powertools) come out as the
handlers' JSON, keyed by the invocation's correlation id; every module names its logger `__name__`."""

from __future__ import annotations

import ast
import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lambdas.common import observability
from lambdas.common.invoke import LambdaInvoker
from sluice.events import CORRELATION_KEY
from sluice.local.workers import LocalContext

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def log_lines() -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """Reads back what the Powertools handler wrote during the test (each line must be JSON)."""
    handler = observability.logger.registered_handler
    stream = io.StringIO()
    previous = handler.setStream(stream)  # type: ignore[attr-defined]
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        handler.setStream(previous)  # type: ignore[attr-defined]


def _engine_logs(event: Any, context: Any) -> str:
    logging.getLogger("sluice.engine.push").warning("slot %s stopped", 3, extra={"queue": "q1"})
    return "done"


def test_an_engine_log_line_is_json_with_the_api_gateway_request_id(log_lines):
    handler = observability.http_function(_engine_logs)
    event = {"requestContext": {"requestId": "req-7f3a"}, "routeKey": "GET /v1/queues"}
    assert handler(event, LocalContext("broker", 29)) == "done"
    [line] = [x for x in log_lines() if x.get("message") == "slot 3 stopped"]
    assert line["correlation_id"] == "req-7f3a"
    assert line["name"] == "sluice.engine.push" and line["queue"] == "q1" and line["level"] == "WARNING"
    assert line["service"] == "sluice" and line["function_name"] == "sluice-local-broker"


def test_a_started_function_logs_under_its_senders_id_else_its_own(log_lines):
    handler = observability.event_function(_engine_logs)
    context = LocalContext("shard", 300)
    handler({"kind": "shard.work", CORRELATION_KEY: "run-42"}, context)
    handler({"kind": "coordinator.run"}, context)  # the schedule sends no id
    ids = [x["correlation_id"] for x in log_lines() if x.get("message") == "slot 3 stopped"]
    assert ids == ["run-42", context.aws_request_id]


def test_events_sent_to_other_functions_carry_the_correlation_id(monkeypatch):
    sent: list[dict[str, Any]] = []

    class FakeLambda:
        def invoke(self, **kwargs: Any) -> None:
            sent.append(json.loads(kwargs["Payload"]))

    monkeypatch.setattr("sluice.adapters.aws.client", lambda *_: FakeLambda())
    observability.logger.set_correlation_id("run-9")
    try:
        LambdaInvoker().invoke_async("shard", {"kind": "shard.work", "queue": "q", "shards": [0]})
    finally:
        observability.logger.set_correlation_id(None)
    assert sent == [{"kind": "shard.work", "queue": "q", "shards": [0], CORRELATION_KEY: "run-9"}]


def test_every_module_names_its_logger_after_itself():
    """`logging.getLogger(__name__)` for our loggers (third-party ones may be tuned by name), and
    Powertools' Logger only in the observability module, so every line goes through one handler."""
    offenders = []
    for path in [*ROOT.glob("sluice/**/*.py"), *ROOT.glob("lambdas/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            arg = node.args[0] if node.args else None
            own = isinstance(arg, ast.Name) and arg.id == "__name__"
            third_party = isinstance(arg, ast.Constant) and not str(arg.value).startswith("sluice")
            if name == "getLogger" and not (own or third_party):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if name in ("Logger", "Tracer", "Metrics") and path.name != "observability.py":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}()")
    assert not offenders


# A fresh interpreter as Lambda starts one (LAMBDA_TASK_ROOT, a sampled trace header): it imports a
# handler, then runs a traced entry point with an X-Ray emitter that keeps what it would send.
_LAMBDA_PROBE = """
import json, sys
import botocore.session
from botocore.config import Config
import {handler}
from lambdas.common import observability

sent = []

class Keep:
    def send_entity(self, entity):
        sent.append(json.loads(entity.serialize()))
    def set_daemon_address(self, address):
        pass

tracer = observability.tracer
print(json.dumps({{
    "tracer": tracer is not None and not tracer.disabled,
    "xray": "aws_xray_sdk.core" in sys.modules,
}}))
if tracer is not None:
    tracer.provider.configure(emitter=Keep())
    from sluice.local.workers import LocalContext
    def probe(event, context):
        sts = botocore.session.get_session().create_client(
            "sts", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
            aws_access_key_id="x", aws_secret_access_key="x",
            config=Config(retries={{"total_max_attempts": 1}}, connect_timeout=1),
        )
        try:
            sts.get_caller_identity()
        except Exception:
            pass
        return "done"
    observability.event_function(probe)({{"kind": "probe"}}, LocalContext("shard", 300))
    print(json.dumps([{{k: e.get(k) for k in ("name", "id", "parent_id")}} for e in sent]))
"""


def _probe(env: dict[str, str], handler: str = "lambdas.shard.handler") -> list[Any]:
    environ = {
        k: v for k, v in os.environ.items() if k not in ("LAMBDA_TASK_ROOT", "POWERTOOLS_TRACE_DISABLED")
    }
    out = subprocess.run(
        [sys.executable, "-c", _LAMBDA_PROBE.format(handler=handler)],
        cwd=ROOT,
        env={**environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_in_lambda_every_entry_point_is_traced_and_aws_calls_are_patched(tmp_path):
    """The stack turns on active tracing; in Lambda the Tracer exists, botocore is patched (each AWS
    call a subsegment) and an entry point sends its `## <handler>` subsegment."""
    lambda_env = {
        "LAMBDA_TASK_ROOT": str(tmp_path),
        "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
    }
    state, sent = _probe(lambda_env)
    assert state == {"tracer": True, "xray": True}
    call, handler = sent  # streamed one by one as each closes
    assert (call["name"], handler["name"]) == ("sts", "## probe")
    assert call["parent_id"] == handler["id"]


@pytest.mark.parametrize("handler", ["lambdas.broker.handler", "lambdas.shard.handler"])
def test_outside_lambda_no_tracer_is_made_and_the_xray_sdk_is_not_imported(handler):
    """`sluice local`, tests, the import bench: Powertools would not trace there, and a Tracer made
    anyway imports aws_xray_sdk (cold-start cost for nothing)."""
    [state] = _probe({}, handler)
    assert state == {"tracer": False, "xray": False}
    [state] = _probe({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"}, handler)
    assert state == {"tracer": False, "xray": False}
