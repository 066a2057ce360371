"""Exact emptiness over HTTP against `sluice local` (issue 22): a queue of many shards holding a handful of
messages. Before, a pull sampled 8 shards: at 32 shards 10-17 of 40 wait-0 pulls answered "none, backlog
0" while 5 messages were stored, and `iterate()` stopped early in most trials. Now a pull that answers
nothing has read every shard, and says so (`exact`)."""

from __future__ import annotations

import json
import uuid

import pytest

from sluice import cli

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(("shards", "held"), [(32, 5), (128, 3)])
def test_no_pull_answers_empty_while_messages_are_stored_and_iterate_yields_all(local_server, shards, held):
    client = local_server.client()
    queue = f"e2e-exact-{uuid.uuid4().hex[:8]}"
    client.create_queue(queue, min_shards=shards, max_shards=shards)
    sent = [client.send(queue, {"n": n})["message_ids"][0] for n in range(held)]

    # wait-0 pulls of one message, never acked: each answer either leases one or counts them all
    seen: set[str] = set()
    for _ in range(held + 5):
        result = client.pull(queue, batch_size=1, visibility_timeout_ms=60_000)
        assert result.messages or result.backlog == held, (result.backlog, result.exact)
        assert not result.drained
        seen |= {m.id for m in result.messages}
        if not result.messages:
            assert result.exact and result.split == {"available": 0, "in_flight": held, "delayed": 0}
    assert seen == set(sent)  # every stored message found by a wait-0 pull, wherever its shard
    client.purge(queue)

    # iterate() stops on the exact signal only: every message of every trial
    for trial in range(3):
        ids = [client.send(queue, {"trial": trial, "n": n})["message_ids"][0] for n in range(held)]
        got = [m.id for m in client.iterate(queue, batch_size=2, wait_time_ms=200)]
        assert sorted(got) == sorted(ids), f"trial {trial}"
    last = client.pull(queue, batch_size=10)
    assert last.messages == [] and last.drained and last.backlog == 0


def test_drain_stops_on_the_exact_signal_with_every_message_kept(local_server, tmp_path, monkeypatch):
    client = local_server.client()
    queue = f"e2e-drain-{uuid.uuid4().hex[:8]}"
    client.create_queue(queue, min_shards=32, max_shards=32)
    sent = {client.send(queue, {"n": n})["message_ids"][0] for n in range(4)}
    out = tmp_path / "drained.ndjson"
    monkeypatch.setenv("SLUICE_URL", local_server.url)
    monkeypatch.setenv("SLUICE_TOKEN", local_server.token)
    cli.main(["drain", queue, "--output", str(out), "--batch-size", "2", "--quiet"])
    assert {json.loads(line)["id"] for line in out.read_text().splitlines()} == sent
    assert client.pull(queue, batch_size=1).drained
