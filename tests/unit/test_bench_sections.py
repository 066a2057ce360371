"""`make bench` rewrites docs/performance.md and keeps only the blocks between `<!-- name:start -->` and
`<!-- name:end -->` markers (bench/run.py `kept_sections`): every section other scripts or hands wrote
must be inside one, or the next run deletes it; and a block is kept once, in its placeholder."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import run


def test_every_written_section_survives_a_bench_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run.sys, "argv", ["bench"])
    text = Path(run.DOC).read_text()
    kept = run.kept_sections("# Performance\n", text).splitlines()
    headings = [line for line in text.splitlines() if line.startswith("### Stop")]
    assert headings, "the issue's stop notes are in docs/performance.md"
    for heading in [*headings, "## Push delivery: units per message", "## Cost at rest"]:
        assert sum(line.startswith(heading) for line in kept) == 1, heading


def test_a_block_fills_its_placeholder_once_and_the_rest_are_appended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run.sys, "argv", ["bench"])
    previous = (
        "old\n<!-- rest:start -->\n<!-- rest:end -->\nold\n<!-- rest:start -->\nfull\n<!-- rest:end -->\n"
        "<!-- twin:start -->\nT\n<!-- twin:end -->\n"
    )
    rendered = "X\n<!-- rest:start -->\n<!-- rest:end -->\nY\n"
    assert run.kept_sections(rendered, previous) == (
        "X\n<!-- rest:start -->\nfull\n<!-- rest:end -->\nY\n\n\n<!-- twin:start -->\nT\n<!-- twin:end -->\n"
    )
