"""The foundation's promises, over HTTP against `sluice local`."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from sluice.client import SluiceApiError

pytestmark = pytest.mark.e2e


def new_queue(client, **settings) -> str:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    client.create_queue(name, **settings)
    return name


def test_1000_messages_4_pullers_each_exactly_once(local_server):
    client = local_server.client()
    queue = new_queue(client)
    sent = []
    for start in range(0, 1000, 100):
        result = client.send_batch(queue, [{"body": {"n": n}} for n in range(start, start + 100)])
        sent += result["message_ids"]
    assert len(set(sent)) == 1000

    received: list[str] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def puller() -> None:
        mine = local_server.client()
        try:
            empty = 0
            while empty < 3:
                result = mine.pull(queue, batch_size=10, visibility_timeout_ms=30_000)
                if not result.messages:
                    empty += 1
                    continue
                empty = 0
                with lock:
                    received.extend(m.id for m in result.messages)
                ack = mine.ack(queue, [m.lease_id for m in result.messages])
                assert ack["ackCount"] == len(result.messages), ack
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=puller) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(received) == sorted(sent)  # every message, exactly once
    assert client.pull(queue, batch_size=1).backlog == 0


def test_unacked_message_returns_with_attempts_2(local_server):
    client = local_server.client()
    queue = new_queue(client)
    client.send(queue, {"job": 1})
    first = client.pull(queue, batch_size=1, visibility_timeout_ms=1000).messages
    assert [m.attempts for m in first] == [1]
    assert client.pull(queue, batch_size=1).messages == []
    time.sleep(1.2)
    again = client.pull(queue, batch_size=1, wait_time_ms=3000).messages
    assert [(m.id, m.attempts) for m in again] == [(first[0].id, 2)]
    client.ack(queue, [again[0].lease_id])


def test_retry_with_delay_is_not_delivered_before_2s(local_server):
    client = local_server.client()
    queue = new_queue(client)
    client.send(queue, "retry me", content_type="text")
    lease = client.pull(queue, batch_size=1).messages[0]
    retried_at = time.monotonic()
    assert client.retry(queue, [lease.lease_id], delay_seconds=2)["retryCount"] == 1
    while True:
        messages = client.pull(queue, batch_size=1, wait_time_ms=500).messages
        if messages:
            break
        assert time.monotonic() - retried_at < 10, "the retried message never came back"
    assert time.monotonic() - retried_at >= 2.0
    assert (messages[0].body, messages[0].attempts) == ("retry me", 2)


def test_errors_over_http_carry_codes(local_server):
    client = local_server.client()
    with pytest.raises(SluiceApiError) as missing:
        client.pull("no-such-queue")
    assert (missing.value.status, missing.value.code) == (404, 10104)
    with pytest.raises(SluiceApiError) as unauthorized:
        local_server.client("not-a-token").list_queues()
    assert (unauthorized.value.status, unauthorized.value.code) == (401, 10001)


def test_cli_sends_and_pulls(local_server, tmp_path):
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "SLUICE_URL": local_server.url, "SLUICE_TOKEN": "e2e-admin-token"}
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "sluice.cli", *args], env=env, capture_output=True, text=True, check=True
    )
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    run("queues", "create", name, "--set", "max_retries=5")
    assert json.loads(run("queues", "get", name, "--json").stdout)["settings"]["max_retries"] == 5
    assert json.loads(run("send", name, '{"hello": "cli"}', "--count", "250", "--json").stdout) == {
        "sent": 250
    }
    pulled = run("pull", name, "--batch-size", "100", "--ack")
    lines = [json.loads(line) for line in pulled.stdout.splitlines()]
    assert len(lines) == 100 and lines[0]["body"] == {"hello": "cli"}
    run("queues", "delete", name)
