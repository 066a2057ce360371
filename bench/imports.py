"""Broker cold import: the handler module in a fresh interpreter, and each heavy dependency alone."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

COMPONENTS = (
    "botocore.session",
    "boto3",
    "pydantic",
    "aws_lambda_powertools.event_handler",
    "aws_lambda_powertools.utilities.parameters",
)


def measure_import(module: str = "lambdas.broker.handler", runs: int = 5) -> dict[str, Any]:
    code = (
        f"import time,sys;w=time.perf_counter();c=time.process_time();import {module};"
        "print(time.perf_counter()-w, time.process_time()-c, 'moto' in sys.modules, len(sys.modules))"
    )
    walls, cpus = [], []
    moto = False
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        )
        wall, cpu_s, has_moto, _n = out.stdout.split()
        walls.append(float(wall) * 1000)
        cpus.append(float(cpu_s) * 1000)
        moto = moto or has_moto == "True"
    base = subprocess.run(
        [
            sys.executable,
            "-c",
            "import time;c=time.process_time();import json,email.parser;print(time.process_time()-c)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    parts = {}
    for part in COMPONENTS:
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import time;c=time.process_time();import {part};print(time.process_time()-c)",
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        parts[part] = float(out.stdout) * 1000
    return {
        "parts": parts,
        "module": module,
        "wall_ms": statistics.median(walls),
        "cpu_ms": statistics.median(cpus),
        "min_wall_ms": min(walls),
        "imports_moto": moto,
        "load": os.getloadavg()[0],
        "baseline_stdlib_cpu_ms": float(base.stdout) * 1000,
    }
