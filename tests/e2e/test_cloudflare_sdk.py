"""The official `cloudflare` Python SDK, both generations, against `sluice local`: every queue call,
each answer validated strictly against the SDK's own model (tests/e2e/cloudflare_sdk_calls.py).

5.x is a dev dependency; 4.x cannot share a venv with it (both are `cloudflare`), so it is installed
without dependencies (they are 5.x's) into a target directory under .venv and run in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import E2E_TOKEN

pytestmark = pytest.mark.e2e

SDK4 = "cloudflare==4.3.1"
SDK4_DIR = Path(sys.prefix) / "cloudflare-4.3.1"
SCRIPT = Path(__file__).with_name("cloudflare_sdk_calls.py")
V5_CALLS = {
    "queues.create", "queues.get", "queues.list", "queues.update", "queues.edit", "queues.delete",
    "queues.get_metrics", "messages.push", "messages.bulk_push", "messages.pull", "messages.ack",
    "purge.start", "purge.status", "consumers.create(http_pull)", "consumers.create(worker)",
    "consumers.update", "consumers.get", "consumers.list", "consumers.delete",
}  # fmt: skip
V4_CALLS = V5_CALLS - {"queues.get_metrics", "consumers.list"}  # 4.x: none; its consumers.get lists
V5_CALLS |= {"messages.peek", "messages.purge"}  # 5.x only


def _sdk4_path() -> Path:
    """4.3.1 in its own target directory, installed once (uv: the project's installer, also in CI)."""
    if not (SDK4_DIR / "cloudflare" / "__init__.py").exists():
        uv = shutil.which("uv")
        command = [uv, "pip"] if uv else [sys.executable, "-m", "uv", "pip"]
        subprocess.run(
            [*command, "install", "--no-deps", "--target", str(SDK4_DIR), "--python", sys.executable, SDK4],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return SDK4_DIR


def _run(url: str, prefix: str, pythonpath: Path | None = None) -> dict:
    env = dict(os.environ)
    root = str(Path(__file__).parents[2])
    env["PYTHONPATH"] = os.pathsep.join([str(pythonpath)] if pythonpath else []) + os.pathsep + root
    out = subprocess.run(
        [sys.executable, str(SCRIPT), url, E2E_TOKEN, prefix],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_queue_call_of_cloudflare_sdk_5(local_server):
    report = _run(local_server.url, "sdk5")
    assert report["version"] == "5.9.0"
    assert set(report["calls"]) == V5_CALLS


def test_every_queue_call_of_cloudflare_sdk_4(local_server):
    report = _run(local_server.url, "sdk4", _sdk4_path())
    assert report["version"] == "4.3.1"
    assert set(report["calls"]) == V4_CALLS
