"""`make bench`: AWS calls, capacity units and cost per message; handler CPU; cold import; local msg/s.

Measures (bench/measure.py, bench/coldstart.py), prices (bench/prices.py), then writes docs/performance.md
and its plot (bench/report.py) and prints the document; every section between `<!-- name:start -->` and
`<!-- name:end -->` markers (the twin's, bench/rest.py's, bench/push.py's, the issues' notes) is kept,
once, in its place (`kept_sections`).
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
    DOC.write_text(kept_sections(text, DOC.read_text() if DOC.exists() else ""))
    print(text)
    print(f"\nwrote {DOC.relative_to(ROOT)} and {PLOT.relative_to(ROOT)}")


def inline_twins() -> tuple:
    """Each scenario whose sends may take the payload tier, again with every body inline
    (`payload_tier: dynamodb`): the engine as it was before the tier, measured in the same run."""
    from sluice.engine import tierpolicy

    return tuple(sc.inline() for sc in SCENARIOS if tierpolicy.might_pay_in_s3(sc.payload.size * sc.batch))


MARKED = re.compile(r"<!-- ([\w-]+):start -->.*?<!-- \1:end -->", flags=re.S)


def kept_sections(text: str, previous: str) -> str:
    """`text` (what this run rendered) with the sections other scripts wrote into the `previous` page: each
    marker block (the twin's, bench/rest.py's, the issue notes) once, in the rendered page's placeholder
    of its name where there is one (an empty `<!-- name:start -->` / `<!-- name:end -->` pair), else
    appended; and, unless this run measured it, bench.faces' section (by its heading). A name marked
    twice in `previous` keeps its longest block (an older run left an empty placeholder beside it)."""
    blocks: dict[str, str] = {}
    for found in MARKED.finditer(previous):
        name, block = found.group(1), found.group(0)
        if len(block) > len(blocks.get(name, "")):
            blocks[name] = block
    appended = ""
    for name, block in blocks.items():
        placeholder = re.search(rf"<!-- {name}:start -->.*?<!-- {name}:end -->", text, flags=re.S)
        if placeholder:
            text = text[: placeholder.start()] + block + text[placeholder.end() :]
        else:
            appended += f"\n{block}\n"
    faces_section = re.search(
        rf"^## {re.escape(faces.TITLE)}\n.*?(?=^## |^<!-- |\Z)", previous, flags=re.S | re.M
    )
    if faces_section and "--no-e2e" in sys.argv:
        appended += "\n" + faces_section.group(0).rstrip("\n") + "\n"
    return text + "\n" + appended


if __name__ == "__main__":
    main()
