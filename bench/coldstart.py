# ruff: noqa: E501, RUF001, RUF003  (report prose and table rows are long lines; the signs are meant)
"""Cold start: each handler's import time as a ratio to `import boto3`, measured in the same run.

Absolute import times on a shared machine swing with its load; a ratio to `import boto3` measured in
the same rounds much less (both slow down together). Every figure is a fresh interpreter importing one
module, rounds interleaved (boto3, broker, consumer, ... then again), median of `ROUNDS`; a first round
warms the bytecode caches and is dropped. The ratio is of CPU time (the process's own), which waiting
for a busy machine's cores does not inflate; wall time is shown beside it. The interpreter is Lambda's (Python 3.12, `.venv-lambda312`,
made by `make bench` from the lock's runtime dependencies only) when present, else this one.

The breakdown comes from `python -X importtime`: self time summed per top-level package, so the rows add
up to the handler's total, and `after first request` adds what a request imports lazily (Powertools
parameters, which imports boto3) to show what the lazy imports move rather than remove. With SnapStart
(stacks/functions.py) the before-snapshot hook imports those into the snapshot instead.

    python -m bench.coldstart            # measure, print, and replace the section in docs/performance.md
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
LAMBDA_PYTHON = ROOT / ".venv-lambda312" / "bin" / "python"
BASELINE = "boto3"
HANDLERS = {
    "broker": "lambdas.broker.handler",
    "consumer": "lambdas.consumer.handler",
    "shard": "lambdas.shard.handler",
    "coordinator": "lambdas.coordinator.handler",
}
TARGETED = ("broker", "consumer")  # issue 15: ≤ TARGET_RATIO × import boto3
TARGET_RATIO = 1.2
LAZY = (
    "aws_lambda_powertools.utilities.parameters",
)  # what the first request imports (lambdas/common/runtime.py)
ROUNDS = 7
HEADING = "## Cold start"

_TIMED = (
    "import time;w=time.perf_counter();c=time.process_time();{imports};"
    "print(time.process_time()-c, time.perf_counter()-w)"
)


def python() -> str:
    return str(LAMBDA_PYTHON) if LAMBDA_PYTHON.exists() else sys.executable


def _run(py: str, code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([py, *flags, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)


def _seconds(py: str, *modules: str) -> tuple[float, float]:
    """(CPU, wall) seconds of importing `modules` in a fresh interpreter."""
    cpu, wall = _run(py, _TIMED.format(imports=";".join(f"import {m}" for m in modules))).stdout.split()
    return float(cpu), float(wall)


def breakdown(py: str, module: str) -> dict[str, float]:
    """ms of import self time per top-level package (`-X importtime`), largest first."""
    err = _run(py, f"import {module}", "-X", "importtime").stderr
    per: dict[str, float] = {}
    for line in err.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line.removeprefix("import time:").split("|")
        package = name.strip().split(".")[0]
        per[package] = per.get(package, 0.0) + int(self_us) / 1000
    return dict(sorted(per.items(), key=lambda kv: kv[1], reverse=True))


def measure(rounds: int = ROUNDS) -> dict[str, Any]:
    py = python()
    version = _run(py, "import sys;print(sys.version.split()[0])").stdout.strip()
    variants: dict[str, tuple[str, ...]] = {BASELINE: (BASELINE,)}
    variants |= {name: (module,) for name, module in HANDLERS.items()}
    variants |= {f"{name}+lazy": (HANDLERS[name], *LAZY) for name in TARGETED}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    wall: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(rounds + 1):
        for name, modules in variants.items():
            cpu_s, wall_s = _seconds(py, *modules)
            if round_:  # round 0 warms the bytecode caches
                cpu[name].append(cpu_s * 1000)
                wall[name].append(wall_s * 1000)
    median = {name: statistics.median(values) for name, values in cpu.items()}
    base = median[BASELINE]
    return {
        "python": py,
        "version": version,
        "rounds": rounds,
        "load": os.getloadavg()[0],
        "median_ms": median,
        "median_wall_ms": {name: statistics.median(values) for name, values in wall.items()},
        "ratio": {name: ms / base for name, ms in median.items() if name != BASELINE},
        "breakdown": {name: breakdown(py, HANDLERS[name]) for name in TARGETED}
        | {BASELINE: breakdown(py, BASELINE)},
        "boto3_in_handler": {
            name: _run(py, f"import sys,{HANDLERS[name]};print('boto3' in sys.modules)").stdout.strip()
            == "True"
            for name in TARGETED
        },
    }


def render(result: dict[str, Any]) -> list[str]:
    median, wall, ratio = result["median_ms"], result["median_wall_ms"], result["ratio"]
    venv = "`.venv-lambda312`, Lambda's Python" if result["python"] == str(LAMBDA_PYTHON) else "the main venv"
    lines = [
        HEADING,
        "",
        "Import time of each handler in a fresh interpreter as a ratio to `import boto3` in the same run",
        f"(Python {result['version']}, {venv}; median of {result['rounds']} interleaved rounds, load average",
        f"{result['load']:.1f} on {os.cpu_count()} cores). Target (issue 15): ≤ {TARGET_RATIO}× for broker and consumer.",
        "",
        "| import | median CPU ms | median wall ms | × `import boto3` (CPU) |",
        "|---|---:|---:|---:|",
        f"| `{BASELINE}` | {median[BASELINE]:.0f} | {wall[BASELINE]:.0f} | 1.00 |",
    ]
    for name in [*HANDLERS, *[f"{t}+lazy" for t in TARGETED]]:
        label = (
            f"`{HANDLERS[name]}`"
            if name in HANDLERS
            else f"`{HANDLERS[name.split('+')[0]]}` + first request's lazy imports"
        )
        lines.append(f"| {label} | {median[name]:.0f} | {wall[name]:.0f} | {ratio[name]:.2f} |")
    lines += [""]
    for name in TARGETED:
        verdict = "meets" if ratio[name] <= TARGET_RATIO else f"misses by {ratio[name] - TARGET_RATIO:.2f}×"
        lines.append(
            f"- {name}: **{ratio[name]:.2f}×** `import boto3`, {verdict} the {TARGET_RATIO}× target; imports boto3: "
            f"{result['boto3_in_handler'][name]}."
        )
    top = 8
    lines += [
        "",
        f"Where the time goes (`-X importtime` self time per top-level package, ms; top {top}, one run each):",
        "",
    ]
    for name, parts in result["breakdown"].items():
        total = sum(parts.values())
        shown = ", ".join(f"`{pkg}` {ms:.0f}" for pkg, ms in list(parts.items())[:top])
        lines.append(f"- `{HANDLERS.get(name, name)}` ({total:.0f} total): {shown}.")
    lines.append("")
    return lines


def assessment(result: dict[str, Any]) -> list[str]:
    """The cold-start bullet of the budgets section."""
    ratio = result["ratio"]
    figures = ", ".join(f"{name} {ratio[name]:.2f}×" for name in TARGETED)
    missed = [
        f"{name} by {ratio[name] - TARGET_RATIO:.2f}×" for name in TARGETED if ratio[name] > TARGET_RATIO
    ]
    verdict = f"missed: {', '.join(missed)}" if missed else "met"
    return [
        f"- **Handler import vs `import boto3` (CPU, same run): {figures}**; target ≤ {TARGET_RATIO}×, {verdict}.",
        "  The handlers import no boto3 and no s3transfer any more (botocore clients; Powertools parameters,",
        "  which imports boto3, only at the first request that needs it). What remains (breakdown above):",
        "  Powertools' event handler with its OpenAPI validation (pydantic, and schema building for Powertools'",
        "  own models at import), botocore itself, and the engine's modules. On AWS the broker and consumer run",
        "  with SnapStart: a new environment resumes from a snapshot taken after init (the before-snapshot hook",
        "  also imports the lazy modules into it), so a restored cold start pays none of these imports.",
        "  X-Ray: the Tracer (and aws_xray_sdk) exists only in Lambda, where tracing is on; the rows above",
        "  have none, as `sluice local` has none. In Lambda it is in the broker's and consumer's snapshot,",
        "  and a shard or coordinator cold start pays its import (about 0.3 s of CPU here).",
    ]


def replace_section(text: str, section: list[str], heading: str = HEADING) -> str:
    """`text` with its section under `heading` (the cold-start one by default; up to the next `## `
    heading or `<!-- ` marker of another generated section, such as the twin's) replaced, or appended."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    if start is None:
        return text.rstrip("\n") + "\n\n" + "\n".join(section).rstrip("\n") + "\n"
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("## ", "<!-- "))), len(lines))
    return "\n".join([*lines[:start], *section, *lines[end:]]).rstrip("\n") + "\n"


def main() -> None:
    result = measure()
    section = [*render(result), *assessment(result), ""]  # as bench/report.py writes it
    print("\n".join(section))
    DOC.write_text(replace_section(DOC.read_text() if DOC.exists() else "", section))
    print(f"wrote the cold-start section of {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
