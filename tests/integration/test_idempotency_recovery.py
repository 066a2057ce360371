"""A keyed send whose process died does not block its Idempotency-Key for long, and the SDK retries
what the server marks as retryable (Retry-After, the gateway's 5xx, a keyed request's 500)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lambdas.common import idempotency
from sluice import faults
from sluice.client import SluiceApiError, SluiceClient
from tests.conftest import ADMIN_TOKEN


def _call(path: str, body: dict, key: str) -> tuple[int, dict, dict]:
    """The broker handler, in-process, with the gateway's event; (status, headers, body)."""
    from sluice.local import gateway
    from sluice.local.workers import invoke

    route, params = gateway.match("POST", path)
    headers = [
        ("content-type", "application/json"),
        ("authorization", f"Bearer {ADMIN_TOKEN}"),
        ("idempotency-key", key),
    ]
    event = gateway.build_event(route, params, "POST", path, "", headers, json.dumps(body).encode())
    status, out_headers, _cookies, out = gateway.unpack_response(invoke(route.function, event))
    return status, {k.lower(): v for k, v in dict(out_headers).items()}, json.loads(out)


def test_a_send_that_died_releases_its_key_within_seconds(api, queue_name):
    api("POST", "/v1/queues", {"queue_name": queue_name})
    path, send = f"/v1/queues/{queue_name}/messages", {"messages": [{"body": "once"}]}
    with faults.armed(faults.PUBLISH_AFTER_ALLOCATE), pytest.raises(faults.InjectedCrash):
        _call(path, send, "k-crash")  # the process dies mid-send: the in-progress record stays behind
    died = time.monotonic()

    status, headers, body = _call(path, send, "k-crash")
    assert status == 409 and body["errors"][0]["code"] == 10115
    assert headers["retry-after"] == "1"  # the SDK's cue that this is worth retrying

    status = 409
    while status == 409 and time.monotonic() - died < idempotency.IN_PROGRESS_SECONDS + 2:
        time.sleep(0.25)
        status, _headers, body = _call(path, send, "k-crash")
    assert status == 200, body
    assert time.monotonic() - died <= idempotency.IN_PROGRESS_SECONDS + 1  # not the 29 s function timeout
    assert len(body["result"]["message_ids"]) == 1
    # The key now answers with that response and stores nothing more. (The crashed send's slot is a gap
    # that pullers seal after 15 s: nothing of it was stored.)
    assert _call(path, send, "k-crash")[2] == body


def test_the_in_progress_window_is_capped_below_the_function_timeout():
    class Context:
        def get_remaining_time_in_millis(self) -> int:
            return 29_000

    assert idempotency._InProgressWindow(Context()).get_remaining_time_in_millis() == 5_000
    assert idempotency._InProgressWindow(None).get_remaining_time_in_millis() == 5_000


# --- the SDK's retry rule ----------------------------------------------------------------------------


class _Scripted(BaseHTTPRequestHandler):
    """Answers each request with the next (status, headers, body) of the class's script."""

    script: list[tuple[int, dict[str, str], dict]] = []
    seen: list[str] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append(self.path)
        status, headers, body = type(self).script.pop(0)
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {**headers, "Content-Length": str(len(data))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args) -> None:
        pass


@pytest.fixture
def scripted():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Scripted.seen = []
    yield _Scripted, SluiceClient(f"http://127.0.0.1:{server.server_port}", "t", max_attempts=3)
    server.shutdown()


def _error(code: int) -> dict:
    return {"success": False, "errors": [{"code": code, "message": "m"}], "messages": [], "result": None}


OK = {"success": True, "errors": [], "messages": [], "result": {"message_ids": ["a"], "offsets": ["o"]}}


def test_sdk_retries_a_still_running_409_and_a_keyed_500(scripted):
    handler, client = scripted
    handler.script = [(409, {"Retry-After": "0"}, _error(10115)), (500, {}, _error(10500)), (200, {}, OK)]
    assert client.send("q", "x")["message_ids"] == ["a"]
    assert len(handler.seen) == 3


def test_sdk_does_not_retry_what_is_not_retryable(scripted):
    handler, client = scripted
    handler.script = [(409, {}, _error(10116))]  # key reused for another request: final
    with pytest.raises(SluiceApiError) as reused:
        client.send("q", "x")
    assert reused.value.code == 10116
    handler.script = [(500, {}, _error(10500))]  # a pull has no key: a 500 may have leased messages
    with pytest.raises(SluiceApiError):
        client.pull("q")
    assert len(handler.seen) == 2


def test_sdk_repeats_a_pull_the_gateway_answered_500_but_not_a_purge(scripted):
    """API Gateway answers 500 `{"message":"Internal Server Error"}` when Lambda refuses the invocation
    (past the account's or the function's reserved concurrency) as when the function crashed: a pull is
    safe to repeat, a purge is not (it would purge what was sent in between)."""
    handler, client = scripted
    pulled = {"messages": [], "message_backlog_count": 0, "backlog_exact": True}
    gateway = {"message": "Internal Server Error"}
    handler.script = [(500, {}, gateway), (500, {}, gateway), (200, {}, {**OK, "result": pulled})]
    assert client.pull("q").messages == []
    assert len(handler.seen) == 3
    handler.script = [(500, {}, gateway)] * 3  # max_attempts=3: then the error is the caller's
    with pytest.raises(SluiceApiError) as refused:
        client.pull("q")
    assert refused.value.status == 500 and len(handler.seen) == 6
    handler.script = [(500, {}, gateway)]
    with pytest.raises(SluiceApiError):
        client.purge("q")
    assert len(handler.seen) == 7
