"""The console's files through the real broker handler (the route table, the gateway's event), and what
serving them costs the send path: nothing (the console is imported at its first request only)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from lambdas.broker.console import assets
from sluice.local import gateway
from sluice.local.workers import invoke

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_MODULES = ("lambdas.broker.console", "lambdas.broker.console.assets")


def get(path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    found = gateway.match("GET", path)
    assert found is not None, path
    route, params = found
    event = gateway.build_event(route, params, "GET", path, "", list((headers or {}).items()), b"")
    status, out_headers, _cookies, body = gateway.unpack_response(invoke(route.function, event))
    return status, out_headers, body.decode()


def test_the_page_and_its_modules_are_served_without_a_token(engine: Any) -> None:
    status, headers, page = get("/console")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert '<script type="module" src="console/app.js"></script>' in page
    assert headers["Content-Security-Policy"] == assets.CONTENT_SECURITY_POLICY
    for name, value in assets.SECURITY_HEADERS.items():
        assert headers[name] == value
    status, headers, script = get("/console/app.js")
    assert status == 200 and headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert script == (assets.STATIC / "app.js").read_text()


def test_an_unchanged_file_answers_304_and_unknown_names_404(engine: Any) -> None:
    _status, headers, _body = get("/console/queue.js")
    status, again, body = get("/console/queue.js", {"If-None-Match": headers["ETag"]})
    assert status == 304 and body == "" and again["ETag"] == headers["ETag"]
    for name in ("index.html", "missing.js", "assets.py", "..%2Fassets.py", "__init__.py"):
        status, headers, body = get(f"/console/{name}")
        assert status == 404 and headers["Content-Type"].startswith("text/plain"), name
        assert "Content-Security-Policy" in headers


def test_every_file_the_page_needs_is_served() -> None:
    """Each module's imports and the page's links name files of the static folder, nothing else."""
    served = set(assets.assets())
    for path in assets.STATIC.iterdir():
        for target in re.findall(r'from "\./([^"]+)"', path.read_text()):
            assert target in served, (path.name, target)
    page = (assets.STATIC / "index.html").read_text()
    assert {m.removeprefix("console/") for m in re.findall(r'"(console/[^"]+)"', page)} <= served


def test_a_send_never_imports_the_console(api: Any, queue_name: str) -> None:
    for module in CONSOLE_MODULES:
        sys.modules.pop(module, None)
    assert api("POST", "/v1/queues", {"queue_name": queue_name})[0] == 201
    assert api("POST", f"/v1/queues/{queue_name}/messages", {"messages": [{"body": 1}]})[0] == 200
    assert not any(module in sys.modules for module in CONSOLE_MODULES)
    assert get("/console")[0] == 200
    assert all(module in sys.modules for module in CONSOLE_MODULES)


def test_the_broker_imports_without_the_console() -> None:
    """A cold start (what bench/coldstart.py times) loads none of it."""
    code = (
        "import sys, lambdas.broker.handler; "
        "print(sorted(m for m in sys.modules if m.startswith('lambdas.broker.console')))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
