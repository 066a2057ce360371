"""The official npm `cloudflare` SDK, its 4.x and 5.x generations and the latest, against `sluice local`:
every queue call, each answer checked against the shape the SDK's types declare
(tests/e2e/cloudflare_npm_calls.cjs), as tests/e2e/test_cloudflare_sdk.py does for the PyPI SDK. npm numbers
its releases its own way: ack `warnings` is a list up to 5.x and a map from 6.0, which Sluice tells from
`X-Stainless-Lang: js` and the version together. The generations are pinned in conformance/package.json
(`make test` installs them)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import E2E_TOKEN

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "conformance" / "node_modules"
SCRIPT = Path(__file__).with_name("cloudflare_npm_calls.cjs")
COMMON = {
    "queues.create", "queues.get", "queues.list", "queues.update", "queues.edit", "messages.push",
    "messages.bulkPush", "messages.pull", "messages.ack", "purge.start", "purge.status",
    "consumers.create(http_pull)", "consumers.create(worker)", "consumers.update", "consumers.get",
    "consumers.delete", "queues.delete",
}  # fmt: skip
LATEST = COMMON | {"queues.getMetrics", "consumers.list", "messages.peek", "messages.purge"}


def _run(url: str, package: str, prefix: str) -> dict:
    if shutil.which("node") is None or not (NODE_MODULES / package / "package.json").is_file():
        pytest.fail(f"npm {package} is not installed: run `make test` (or `cd conformance && npm ci`)")
    out = subprocess.run(
        ["node", str(SCRIPT), str(NODE_MODULES), package, url, E2E_TOKEN, prefix],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout)


@pytest.mark.parametrize(
    ("package", "version", "calls"),
    [("cloudflare-4", "4.5.0", COMMON), ("cloudflare-5", "5.2.0", COMMON | {"consumers.list"})],
)
def test_every_queue_call_of_the_npm_sdk_before_6(local_server, package: str, version: str, calls) -> None:
    """5.2.0 is the generation whose number looked like the PyPI SDK's map-typed 5.x."""
    report = _run(local_server.url, package, package)
    assert report["version"] == version
    assert set(report["calls"]) == calls
    assert report["warnings"] == "array"


def test_every_queue_call_of_the_latest_npm_sdk(local_server) -> None:
    pinned = json.loads((ROOT / "conformance" / "package.json").read_text())["dependencies"]["cloudflare"]
    report = _run(local_server.url, "cloudflare", "npmlatest")
    assert report["version"] == pinned
    assert set(report["calls"]) == LATEST
    assert report["warnings"] == "object"
