"""The coordinator's EMF: per queue and region in a multi-region deployment, the all-regions sum from the
home region's coordinator, and the single-region shape unchanged."""

from __future__ import annotations

import json

import pytest

from sluice.engine.coordinator import QueueReport, RunReport
from sluice.engine.coordinator.reports import Figures


def emitted(report: RunReport, capsys, monkeypatch) -> list[dict]:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    from lambdas.coordinator.handler import emit_metrics

    emit_metrics(report)
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]


def dimensions(doc: dict) -> list[str]:
    return sorted(doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0])


def test_per_region_and_all_regions_figures(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    home = QueueReport(
        queue="q", region="us-east-1", open_shards=2, backlog={"default": 5}, writes_per_s=10.0
    )
    home.all_regions = Figures.total([home.figures(), Figures(3, {"default": 7, "g": 1}, 30.0, 9.0)])
    docs = emitted(RunReport("h", acted=True, queues=[home], region="us-east-1"), capsys, monkeypatch)
    per_region, total = docs[0], docs[1]
    assert dimensions(per_region) == ["queue", "region", "service"] and per_region["region"] == "us-east-1"
    assert (per_region["Shards"], per_region["Backlog"]) == ([2], [5])
    assert dimensions(total) == ["queue", "service"]
    figures = ("Shards", "Backlog", "WritesPerSecond", "OldestMessageAgeSeconds")
    assert [total[name] for name in figures] == [[5], [12], [40.0], [9.0]]


def test_single_region_metrics_have_no_region_dimension(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    q = QueueReport(queue="q", open_shards=1, backlog={"default": 2})
    (doc,) = emitted(RunReport("h", acted=True, queues=[q]), capsys, monkeypatch)[:1]
    assert dimensions(doc) == ["queue", "service"] and doc["Shards"] == [1]


def test_an_idle_queue_and_an_idle_run_emit_no_metric(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each custom metric is billed for every hour it is emitted in: at rest the stack emits none."""
    idle = QueueReport(queue="idle", open_shards=4)
    assert emitted(RunReport("h", acted=True, queues=[idle]), capsys, monkeypatch) == []
    busy = QueueReport(queue="busy", open_shards=1, writes_per_s=3.0)
    docs = emitted(RunReport("h", acted=True, queues=[idle, busy]), capsys, monkeypatch)
    assert [d.get("queue") for d in docs if "queue" in d] == ["busy"]
