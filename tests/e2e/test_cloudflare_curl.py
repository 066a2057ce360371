"""The curl calls of Cloudflare's pull-consumer and HTTP-publish docs against `sluice local`, changing
only the base URL and the token (Cloudflare's `https://api.cloudflare.com/client/v4` → the local URL)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

pytestmark = pytest.mark.e2e
TOKEN = "sluice_e2e_cloudflare_token"


@pytest.fixture(scope="module")
def local_url() -> Iterator[str]:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    env = {**os.environ, "POWERTOOLS_LOG_LEVEL": "ERROR"}
    for name in list(env):  # the subprocess talks to its own moto server, not a test's in-process mock
        if name.startswith("SLUICE_") and name != "SLUICE_ADMIN_TOKEN":
            del env[name]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sluice.cli", "local", "--port", "0", "--admin-token", TOKEN],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        url = None
        while time.monotonic() < deadline and url is None:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                pytest.fail("sluice local exited before it was ready")
            found = re.search(r"ready on (http://\S+)", line)
            url = found.group(1) if found else None
        assert url, "sluice local did not become ready"
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def curl(*args: str) -> dict:
    out = subprocess.run(["curl", "-sS", *args], check=True, capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout)


def test_cloudflare_pull_consumer_curls_work_against_sluice_local(local_url):
    base = f"{local_url}/client/v4"  # was https://api.cloudflare.com/client/v4
    account, queue = "0123456789abcdef0123456789abcdef", "cf-curl"
    created = curl(
        "-X", "POST", f"{local_url}/v1/queues", "-H", f"Authorization: Bearer {TOKEN}",
        "--data", json.dumps({"queue_name": queue}),
    )  # fmt: skip
    assert created["success"], created

    # HTTP publish, as in Cloudflare's docs
    sent = curl(
        "-X", "POST", f"{base}/accounts/{account}/queues/{queue}/messages",
        "-H", "Content-Type: application/json",
        "-H", f"Authorization: Bearer {TOKEN}",
        "--data", '{ "body": { "greeting": "hello", "timestamp": "2025-07-24T12:00:00Z" } }',
    )  # fmt: skip
    assert sent["success"] is True
    batch = curl(
        "-X", "POST", f"{base}/accounts/{account}/queues/{queue}/messages/batch",
        "-H", "Content-Type: application/json",
        "-H", f"Authorization: Bearer {TOKEN}",
        "--data", '{ "messages": [{ "body": "hello world", "content_type": "text" }] }',
    )  # fmt: skip
    assert batch["success"] is True

    # Pull, as in the pull-consumer docs
    pulled = curl(
        f"{base}/accounts/{account}/queues/{queue}/messages/pull",
        "--header", f"Authorization: Bearer {TOKEN}",
        "--header", "Content-Type: application/json",
        "--data", '{ "visibility_timeout": 10000, "batch_size": 2 }',
    )  # fmt: skip
    assert pulled["success"] is True, pulled
    messages = pulled["result"]["messages"]
    assert len(messages) == 2 and pulled["result"]["message_backlog_count"] == 2
    assert messages[1]["body"] == "hello world"

    # Acknowledge one, retry the other, as in the pull-consumer docs
    ack_body = {
        "acks": [{"lease_id": messages[0]["lease_id"]}],
        "retries": [{"lease_id": messages[1]["lease_id"]}],
    }
    acked = curl(
        f"{base}/accounts/{account}/queues/{queue}/messages/ack",
        "--header", f"Authorization: Bearer {TOKEN}",
        "--header", "Content-Type: application/json",
        "--data", json.dumps(ack_body),
    )  # fmt: skip
    assert acked["success"] is True
    assert acked["result"] == {"ackCount": 1, "retryCount": 1, "warnings": []}
