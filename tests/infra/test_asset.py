"""The Lambda code asset ships exactly what the handlers import: their import closure within our packages
(found statically, so imports inside functions count), and the console's static files, which the broker
serves; nothing of the local runtime, the CLI or the docs build; and the handlers import from a copy of it
with only the runtime requirements installed."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from lambdas.broker.console.assets import STATIC as CONSOLE_STATIC
from sluice import constants as c
from stacks.functions import CODE_DIRS, NOT_DEPLOYED, stage_code

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
HANDLER_MODULES = sorted({h.rpartition(".")[0] for h in c.FUNCTION_HANDLERS.values()})


def _module_file(root: Path, module: str) -> Path | None:
    path = root.joinpath(*module.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def import_closure(root: Path, modules: list[str]) -> set[str]:
    """Files (relative to `root`) of our modules that `modules` import, transitively, packages' `__init__`
    included; every `import` statement counts, wherever it is in the module."""
    files: set[str] = set()
    todo, seen = list(modules), set()
    while todo:
        module = todo.pop()
        if module in seen or module.split(".")[0] not in CODE_DIRS:
            continue
        seen.add(module)
        path = _module_file(root, module)
        if path is None:  # `from package import name` where name is not a module
            continue
        files.add(path.relative_to(root).as_posix())
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        package = parts if path.name == "__init__.py" else parts[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                anchor = package[: len(package) - node.level + 1] if node.level else []
                base = ".".join([*anchor, node.module] if node.module else anchor)
                todo += [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return files


def staged_files(staged: Path) -> set[str]:
    return {p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()}


def test_the_asset_is_the_handlers_import_closure_and_the_console() -> None:
    staged = stage_code()
    shipped = staged_files(staged)
    console = {p.relative_to(ROOT).as_posix() for p in CONSOLE_STATIC.iterdir() if p.is_file()}
    assert {"lambdas/broker/console/static/index.html", "lambdas/broker/console/static/app.js"} <= console
    assert import_closure(ROOT, HANDLER_MODULES) | console == shipped  # nothing missing, nothing extra
    assert all((staged / f).read_bytes() == (ROOT / f).read_bytes() for f in console)
    for excluded in NOT_DEPLOYED:
        assert not any(f == excluded or f.startswith(f"{excluded}/") for f in shipped), excluded
    assert "lambdas/coordinator/handler.py" in shipped and "sluice/engine/coordinator/run.py" in shipped


def _runtime_distributions() -> set[str]:
    """The runtime requirements of pyproject.toml and theirs, transitively (what Lambda gets from its
    runtime and the Powertools layer), as installed distribution names."""
    wanted = [
        Requirement(r)
        for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    ]
    found: set[str] = set()
    while wanted:
        req = wanted.pop()
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if name in found:
            continue
        found.add(name)
        for sub in metadata.requires(req.name) or []:
            sub_req = Requirement(sub)
            extras = req.extras or {""}
            if sub_req.marker is None or any(sub_req.marker.evaluate({"extra": e}) for e in extras):
                wanted.append(sub_req)
    return found


def _top_level_modules(distributions: set[str]) -> set[str]:
    names: set[str] = set()
    for dist in metadata.distributions():
        if re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower() not in distributions:
            continue
        for file in dist.files or []:
            top = file.parts[0]
            if top.endswith((".dist-info", ".pth")) or top == "..":
                continue
            names.add(top.removesuffix(".py").split(".")[0])
    return names


def _installed_top_level(site_dirs: list[str]) -> set[str]:
    return {
        p.name.removesuffix(".py").split(".")[0]
        for d in site_dirs
        for p in Path(d).iterdir()
        if not p.name.endswith((".dist-info", ".pth", ".egg-info")) and not p.name.startswith("_")
    }


def test_handlers_import_from_the_asset_with_only_runtime_requirements(tmp_path: Path) -> None:
    asset = tmp_path / "task"
    shutil.copytree(stage_code(), asset)
    allowed = _top_level_modules(_runtime_distributions())
    assert {"boto3", "pydantic", "aws_lambda_powertools"} <= allowed
    site_dirs = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    blocked = _installed_top_level(site_dirs) - allowed
    assert {"moto", "tqdm", "aws_cdk"} <= blocked
    # -S: no site-packages and no .pth (the editable install would put the repo on the path).
    code = f"""
import importlib, importlib.abc, sys
sys.path[:] = [{str(asset)!r}, *sys.path[1:], *{site_dirs!r}]

class OnlyRuntime(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {sorted(blocked)!r}:
            raise ModuleNotFoundError(f"not a runtime requirement: {{name}}", name=name)

sys.meta_path.insert(0, OnlyRuntime())
for module in {HANDLER_MODULES!r}:
    importlib.import_module(module)
ours = {{m.__file__ for n, m in sys.modules.items() if n.split(".")[0] in {CODE_DIRS!r}}}
outside = sorted(f for f in ours if f and not f.startswith({str(asset)!r}))
print("imported", len({HANDLER_MODULES!r}), "outside", outside)
"""
    done = subprocess.run(
        [sys.executable, "-S", "-c", code], cwd=asset, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"imported {len(HANDLER_MODULES)} outside []" in done.stdout
