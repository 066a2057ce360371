"""SnapStart hooks: registered by the handlers' imports, and they make restored environments differ.

A fork is close to what a snapshot restore is to the process: every child starts with the parent's
memory, cached clients included. Two children of one parent are two environments restored from one
snapshot. One difference: CPython re-seeds `random` in a forked child (an at-fork handler), which a
microVM restore never runs, so each child first puts back the state `random` had at the snapshot."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from lambdas.common import restore, runtime, snapstart
from sluice.adapters import aws

ROOT = Path(__file__).resolve().parents[2]


def _in_two_restores(draw: Callable[[], object], *, hooks: bool) -> list[object]:
    """`draw()` in two forked children of this process, each after the after-restore hooks (or not)."""
    snapshot = random.getstate()
    results = []
    for _ in range(2):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(read)
            random.setstate(snapshot)
            if hooks:
                for func, args, kwargs in snapstart.after_restore_hooks():
                    func(*args, **kwargs)
            os.write(write, json.dumps(draw()).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            results.append(json.loads(pipe.read()))
        os.waitpid(pid, 0)
    return results


def _shard_choices() -> list[object]:
    """What the engine draws from `random`: a send's shard and a pull's sample of shards."""
    shards = list(range(64))
    return [random.choice(shards), random.sample(shards, 8), random.random()]


def test_the_handlers_register_the_hooks() -> None:
    import lambdas.broker.handler
    import lambdas.consumer.handler  # noqa: F401

    after = [func for func, _, _ in snapstart.after_restore_hooks()]
    assert restore.reseed_random in after and restore.drop_shared_state in after
    before = [func for func, _, _ in snapstart.before_snapshot_hooks()]
    assert restore.import_for_snapshot in before


def test_restores_from_one_snapshot_draw_the_same_without_the_hooks_and_differ_with_them() -> None:
    same = _in_two_restores(_shard_choices, hooks=False)
    assert same[0] == same[1]  # the problem is real: every restored environment picks alike
    differ = _in_two_restores(_shard_choices, hooks=True)
    assert differ[0] != differ[1]


def test_the_hooks_drop_cached_clients_and_the_engine(settings: object) -> None:
    engine = runtime.service()
    client = aws.client("dynamodb", None)
    assert aws.client("dynamodb", None) is client  # cached
    for func, args, kwargs in snapstart.after_restore_hooks():
        func(*args, **kwargs)
    assert aws.client("dynamodb", None) is not client  # made anew, from a new session
    assert runtime.service.cache_info().currsize == 0
    assert runtime.service() is not engine  # rebuilt: fresh clients, token and key caches


def test_broker_idempotency_layer_is_rebuilt_after_restore(settings: object) -> None:
    from lambdas.common import idempotency

    idempotency._guarded()
    assert idempotency._guarded.cache_info().currsize == 1
    for func, args, kwargs in snapstart.after_restore_hooks():
        func(*args, **kwargs)
    assert idempotency._guarded.cache_info().currsize == 0


@pytest.mark.parametrize("handler", ["lambdas.broker.handler", "lambdas.consumer.handler"])
def test_lazy_imports_stay_out_of_the_handler_import_and_go_into_the_snapshot(handler: str) -> None:
    code = (
        "import sys, json;"
        f"import {handler};"
        "lazy = ['boto3', 's3transfer', 'aws_lambda_powertools.utilities.parameters'];"
        "before = [m for m in lazy if m in sys.modules];"
        "from lambdas.common import snapstart;"
        "ran = snapstart.snapshot_and_restore();"
        "print(json.dumps([before, 'aws_lambda_powertools.utilities.parameters' in sys.modules, ran]))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    before, warmed, ran = json.loads(out.stdout)
    assert before == []
    assert warmed
    assert "reseed_random" in ran and "drop_shared_state" in ran


def test_the_local_registry_keeps_lambdas_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before-snapshot hooks run newest first, after-restore hooks in registration order (AWS docs)."""
    monkeypatch.setattr(snapstart, "_before", [])
    monkeypatch.setattr(snapstart, "_after", [])
    calls: list[str] = []
    snapstart.register_before_snapshot(calls.append, "b1")
    snapstart.register_before_snapshot(calls.append, "b2")
    snapstart.register_after_restore(calls.append, "a1")

    @snapstart.register_after_restore
    def a2() -> None:
        calls.append("a2")

    assert snapstart.snapshot_and_restore() == [
        "list.append",
        "test_the_local_registry_keeps_lambdas_order.<locals>.a2",
    ]
    assert calls == ["b2", "b1", "a1", "a2"]
