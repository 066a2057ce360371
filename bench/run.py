"""`make bench`: AWS calls, capacity units and cost per message; handler CPU; cold import; local msg/s.

Measures (bench/measure.py, bench/coldstart.py), prices (bench/prices.py), then writes docs/performance.md
and its plot (bench/report.py) and prints the document; the twin's sections (between their
`<!-- ...:start -->` and `<!-- ...:end -->` markers, written by `python -m bench.twin`) are kept.
Figures, not asserts. `--no-e2e` skips the local HTTP run; `--report-only` writes the document again
from the figures the last run saved in bench/out/ (after a change to the report or the prices).
"""

from __future__ import annotations

import pickle
import re
import sys
from pathlib import Path

from bench import coldstart, faces
from bench.measure import SCENARIOS, measure_e2e, measure_in_process
from bench.report import costs, plot, render

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
PLOT = ROOT / "docs" / "img" / "cost.png"
SAVED = ROOT / "bench" / "out" / "measured.pickle"  # our own figures, read back by --report-only


def main() -> None:
    if "--report-only" in sys.argv:
        measured, imports, e2e = pickle.loads(SAVED.read_bytes())
    else:
        measured = measure_in_process(SCENARIOS + inline_twins())
        imports = coldstart.measure()
        e2e = None if "--no-e2e" in sys.argv else measure_e2e()
        SAVED.parent.mkdir(parents=True, exist_ok=True)
        SAVED.write_bytes(pickle.dumps((measured, imports, e2e)))
    priced = costs(measured)
    text = render(measured, priced, imports, e2e)
    plot(priced, PLOT)
    DOC.write_text(text + "\n" + twin_sections())
    print(text)
    print(f"\nwrote {DOC.relative_to(ROOT)} and {PLOT.relative_to(ROOT)}")


def inline_twins() -> tuple:
    """Each scenario whose sends may take the payload tier, again with every body inline
    (`payload_tier: dynamodb`): the engine as it was before the tier, measured in the same run."""
    from sluice.engine import tierpolicy

    return tuple(sc.inline() for sc in SCENARIOS if tierpolicy.might_pay_in_s3(sc.payload.size * sc.batch))


def twin_sections() -> str:
    """The sections other scripts write into the current document, kept as they are: the twin's
    (between markers) and, unless this run measured it, bench.faces' (by its heading)."""
    text = DOC.read_text() if DOC.exists() else ""
    found = re.findall(r"(<!-- ([\w-]+):start -->.*?<!-- \2:end -->)", text, flags=re.S)
    kept = "".join(f"\n{block}\n" for block, _name in found)
    faces_section = re.search(
        rf"^## {re.escape(faces.TITLE)}\n.*?(?=^## |^<!-- |\Z)", text, flags=re.S | re.M
    )
    if faces_section and "--no-e2e" in sys.argv:
        kept += "\n" + faces_section.group(0).rstrip("\n") + "\n"
    return kept


if __name__ == "__main__":
    main()
