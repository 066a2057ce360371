"""`make bench`: AWS calls, capacity units and cost per message; handler CPU; cold import; local msg/s.

Measures (bench/measure.py, bench/coldstart.py), prices (bench/prices.py), then writes docs/performance.md
and its plot (bench/report.py) and prints the document. Figures, not asserts. `--no-e2e` skips the
local HTTP run.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench import coldstart
from bench.measure import measure_e2e, measure_in_process
from bench.report import costs, plot, render

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
PLOT = ROOT / "docs" / "img" / "cost.png"


def main() -> None:
    measured = measure_in_process()
    priced = costs(measured)
    imports = coldstart.measure()
    e2e = None if "--no-e2e" in sys.argv else measure_e2e()
    text = render(measured, priced, imports, e2e)
    plot(priced, PLOT)
    DOC.write_text(text + "\n")
    print(text)
    print(f"\nwrote {DOC.relative_to(ROOT)} and {PLOT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
