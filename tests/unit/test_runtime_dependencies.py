"""What Lambda and Glue run never needs what only the local runtime and the CLI use (moto, tqdm): those
are the `local` extra, not runtime requirements, and no handler or job module imports them."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCAL_ONLY = ("moto", "tqdm")
DEPLOYED_MODULES = (
    "lambdas.broker.handler",
    "lambdas.consumer.handler",
    "lambdas.coordinator.handler",
    "lambdas.shard.handler",
    "glue_jobs.pull_consumer",
    "glue_jobs.segment_reader",
)


def _name(requirement: str) -> str:
    return re.split(r"[\[=<>;! ]", requirement, maxsplit=1)[0].lower()


def test_local_only_packages_are_an_extra_not_runtime_requirements() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not {_name(r) for r in project["dependencies"]} & set(LOCAL_ONLY)
    assert {_name(r) for r in project["optional-dependencies"]["local"]} >= set(LOCAL_ONLY)


def test_handlers_and_jobs_import_without_moto_or_tqdm() -> None:
    code = f"""
import importlib, importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {LOCAL_ONLY!r}:
            raise ModuleNotFoundError(name, name=name)

sys.meta_path.insert(0, Block())
for module in {DEPLOYED_MODULES!r}:
    importlib.import_module(module)
print("imported", len({DEPLOYED_MODULES!r}))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"imported {len(DEPLOYED_MODULES)}" in done.stdout
