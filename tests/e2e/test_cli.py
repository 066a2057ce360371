"""The `sluice` command against `sluice local`: one test per command group, with `--json` output."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from sluice import cli
from sluice.client import SluiceApiError
from tests.e2e.conftest import E2E_TOKEN

pytestmark = pytest.mark.e2e


@pytest.fixture
def run(local_server, monkeypatch, capsys):
    """`sluice ARGS --json` in this process; returns the parsed stdout (one document or JSON lines)."""
    monkeypatch.setenv("SLUICE_URL", local_server.url)
    monkeypatch.setenv("SLUICE_TOKEN", E2E_TOKEN)

    def invoke(*args: str, lines: bool = False) -> object:
        capsys.readouterr()
        cli.main([*args])
        out = capsys.readouterr().out
        return [json.loads(x) for x in out.splitlines()] if lines else json.loads(out)

    return invoke


@pytest.fixture
def queue(local_server) -> Iterator[str]:
    """A fresh queue, deleted afterwards with its dead letter queue (less shard work for the runtime)."""
    client = local_server.client()
    name = f"cli-{uuid.uuid4().hex[:8]}"
    client.create_queue(name)
    yield name
    for leftover in (name, f"{name}-dlq"):
        with contextlib.suppress(SluiceApiError):
            client.delete_queue(leftover)


def test_help_lists_every_command_group():
    out = subprocess.run(
        [sys.executable, "-m", "sluice.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for group in (
        "local", "token", "queues", "send", "pull", "drain", "ack", "lease", "groups", "purge", "pause",
        "resume", "metrics", "redrive", "consumers", "tail", "shards",
    ):  # fmt: skip
        assert f"\n    {group} " in out or f"\n    {group}\n" in out, group


def test_queues(run):
    name = f"cli-{uuid.uuid4().hex[:8]}"
    created = run("queues", "create", name, "--set", "max_retries=5", "--json")
    assert created["settings"]["max_retries"] == 5 and len(created["queue_id"]) == 32
    assert run("queues", "get", name, "--json")["queue_name"] == name
    assert name in {q["queue_name"] for q in run("queues", "list", "--json")}
    assert run("queues", "update", name, "--set", "max_retries=7", "--json")["settings"]["max_retries"] == 7
    assert run("queues", "delete", name, "--json") == {"deleted": name}


def test_messages_send_pull_ack_lease_drain(run, queue):
    """The backlog `pull --ack` reports is the one after its own ack (was: before it)."""
    assert run("send", queue, '{"n": 1}', "--count", "1000", "--json") == {"sent": 1000}
    pulled = run("pull", queue, "--batch-size", "10", "--ack", "--json")
    assert (len(pulled["messages"]), pulled["acked"], pulled["backlog"]) == (10, 10, 990)
    assert run("metrics", queue, "--json")["backlog_count"] == 990
    batch = run("pull", queue, "--batch-size", "2", "--json")["messages"]
    extended = run("lease", queue, batch[0]["lease_id"], "--visibility-timeout-ms", "60000", "--json")
    assert extended["extendedCount"] == 1
    acked = run("ack", queue, batch[0]["lease_id"], "--json")
    assert acked["ackCount"] == 1
    assert run("ack", queue, batch[1]["lease_id"], "--retry", "--json")["retryCount"] == 1
    drained = run("drain", queue, "--max", "500", "--json")
    assert drained == {"drained": 500, "backlog": 489}
    assert run("drain", queue, "--json") == {"drained": 489, "backlog": 0}


def test_groups(run, queue):
    assert run("groups", "create", queue, "analytics", "--start", "earliest", "--json")["name"] == "analytics"
    assert {g["name"] for g in run("groups", "list", queue, "--json")} == {"default", "analytics"}
    assert run("groups", "get", queue, "analytics", "--json")["name"] == "analytics"
    run("send", queue, '"x"', "--json")
    assert len(run("pull", queue, "--group", "analytics", "--json")["messages"]) == 1
    assert run("groups", "delete", queue, "analytics", "--json") == {"deleted": "analytics"}


def test_operations_purge_pause_resume_metrics_redrive(run, queue, local_server):
    run("send", queue, '"x"', "--count", "3", "--json")
    assert run("metrics", queue, "--json")["backlog_count"] == 3
    assert run("purge", queue, "--json")["queue_name"] == queue
    assert run("metrics", queue, "--json")["backlog_count"] == 0
    assert run("pause", queue, "--json")["paused"] is True
    with pytest.raises(SystemExit, match="10109"):
        run("pull", queue, "--json")
    assert run("resume", queue, "--json")["paused"] is False
    dlq = f"{queue}-dlq"
    local_server.client().update_queue(queue, dead_letter_queue=dlq)  # redrive takes its own DLQ only
    run("send", dlq, '"dead"', "--count", "5", "--json")
    moved = run("redrive", queue, "--from", dlq, "--json")
    assert (moved["moved"], moved["remaining_in_source"]) == (5, 0)
    assert run("metrics", queue, "--json")["backlog_count"] == 5


def test_push_consumers(run, queue):
    created = run(
        "consumers", "create", queue, "hook", "--type", "webhook",
        "--target-url", "https://example.com/hook", "--set", "max_batch_size=20", "--json",
    )  # fmt: skip
    assert (created["id"], created["max_batch_size"]) == ("hook", 20)
    assert [c["id"] for c in run("consumers", "list", queue, "--json")] == ["hook"]
    assert run("consumers", "get", queue, "hook", "--json")["url"] == "https://example.com/hook"
    assert run("consumers", "delete", queue, "hook", "--json") == {"deleted": "hook"}
    assert run("consumers", "list", queue, "--json") == []


def test_tokens(run, queue):
    made = run("token", "create", "--queue", queue, "--scope", "read", "--json")
    assert made["token"] and made["scopes"] == ["read"]
    listed = run("token", "list", "--json")
    assert made["token_id"] in json.dumps(listed) and made["token"] not in json.dumps(listed)
    assert run("token", "revoke", made["token_id"], "--json") == {"revoked": made["token_id"]}


def test_tail_and_shards(run, queue, local_server):
    run("send", queue, '{"i": 0}', "--count", "3", "--json")
    records = run("tail", queue, "--from", "-", "--no-follow", lines=True)
    assert [r["body"] for r in records] == [{"i": 0}] * 3
    shards = run("shards", queue, "--json")
    assert shards[0]["shard"] == 0 and shards[0]["last_offset"] == records[-1]["offset"]
    # Following: records sent while tail waits arrive, and --max-records bounds it.
    client = local_server.client()
    since = str(int(time.time() * 1000))
    client.send(queue, {"i": 1})
    followed = run("tail", queue, "--from", since, "--max-records", "1", "--max-seconds", "20", lines=True)
    assert [r["body"] for r in followed] == [{"i": 1}]
    quiet = run("tail", queue, "--from", records[-1]["offset"], "--max-seconds", "1", lines=True)
    assert [r["body"] for r in quiet] == [{"i": 1}]
