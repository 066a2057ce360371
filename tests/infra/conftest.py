"""One synthesized SluiceStack per test session (≈ 15 s): every infra test reads this template."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@pytest.fixture(scope="session")
def app_and_stack(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    from app import build_app

    return build_app(outdir=str(tmp_path_factory.mktemp("cdk.out")))


@pytest.fixture(scope="session")
def stack(app_and_stack: tuple[Any, Any]) -> Any:
    return app_and_stack[1]


@pytest.fixture(scope="session")
def template(stack: Any) -> Any:
    from aws_cdk.assertions import Template

    return Template.from_stack(stack)


@pytest.fixture(scope="session")
def cfn(template: Any) -> dict[str, Any]:
    """The template as plain JSON (faster to walk than repeated Template queries)."""
    return template.to_json()


@pytest.fixture(scope="session")
def resources(cfn: dict[str, Any]) -> dict[str, Any]:
    return cfn["Resources"]
