"""`make bench`: AWS calls, capacity units and cost per message; handler CPU; cold import; local msg/s.

Measures (bench/measure.py, bench/coldstart.py), prices (bench/prices.py), then writes docs/performance.md
and its plot (bench/report.py) and prints the document; the twin's sections (between their
`<!-- ...:start -->` and `<!-- ...:end -->` markers, written by `python -m bench.twin`) are kept.
Figures, not asserts. `--no-e2e` skips the local HTTP run.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from bench import coldstart
from bench.measure import SCENARIOS, measure_e2e, measure_in_process
from bench.report import costs, plot, render

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
PLOT = ROOT / "docs" / "img" / "cost.png"


def main() -> None:
    measured = measure_in_process(SCENARIOS + inline_twins())
    priced = costs(measured)
    imports = coldstart.measure()
    e2e = None if "--no-e2e" in sys.argv else measure_e2e()
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
    """The twin's marked sections of the current document, kept as they are."""
    text = DOC.read_text() if DOC.exists() else ""
    found = re.findall(r"(<!-- ([\w-]+):start -->.*?<!-- \2:end -->)", text, flags=re.S)
    return "".join(f"\n{block}\n" for block, _name in found)


if __name__ == "__main__":
    main()
