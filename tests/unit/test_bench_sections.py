"""`make bench` rewrites docs/performance.md and keeps only the blocks between `<!-- name:start -->` and
`<!-- name:end -->` markers (bench/run.py `twin_sections`): every section other scripts or hands wrote
must be inside one, or the next run deletes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import run


def test_every_written_section_survives_a_bench_run(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = Path(run.DOC)
    monkeypatch.setattr(run.sys, "argv", ["bench"])
    kept = run.twin_sections()
    headings = [line for line in doc.read_text().splitlines() if line.startswith("### Stop")]
    assert headings, "the issue's stop notes are in docs/performance.md"
    for heading in [*headings, "## Push delivery: units per message", "## Consumer-driven scaling"]:
        assert any(line.startswith(heading) for line in kept.splitlines()), heading
