"""The curl calls of Cloudflare's pull-consumer and HTTP-publish docs against `sluice local`, changing
only the base URL and the token (Cloudflare's `https://api.cloudflare.com/client/v4` → the local URL)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.e2e.conftest import E2E_TOKEN as TOKEN

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def local_url(local_server) -> str:
    """The session's `sluice local` subprocess (tests/e2e/conftest.py)."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    return local_server.url


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
    assert acked["result"] == {"ackCount": 1, "retryCount": 1, "warnings": {}}  # lease id → warning
