"""One synthesized SluiceStack per test session (≈ 15 s): every infra test reads this template."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
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


@pytest.fixture
def moto_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh moto server (provisioning tests)."""
    from moto.server import ThreadedMotoServer

    from sluice.adapters import aws

    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    aws.reset_clients()
    try:
        yield f"http://{host}:{port}"
    finally:
        aws.reset_clients()
        server.stop()
