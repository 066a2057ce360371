"""`sluice local` as a subprocess, driven over HTTP with the SDK: what a user does on a laptop."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from sluice import constants as c
from sluice.client import SluiceClient

E2E_TOKEN = "e2e-admin-token"


@dataclass
class LocalServer:
    url: str
    process: subprocess.Popen

    def client(self, token: str = E2E_TOKEN) -> SluiceClient:
        return SluiceClient(self.url, token)


@pytest.fixture(scope="session")
def local_server() -> Iterator[LocalServer]:
    # A clean environment, but the IAM call audit (tests/conftest.py) records this server's calls too.
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_") or k == c.ENV_IAM_AUDIT_FILE}
    process = subprocess.Popen(
        [sys.executable, "-m", "sluice.cli", "local", "--port", "0", "--admin-token", E2E_TOKEN],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 90
    url = None
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        found = re.fullmatch(r"sluice local ready on (http://\S+)\n", line)
        if found:
            url = found.group(1)
            break
    if url is None:
        process.kill()
        pytest.fail("sluice local did not print its ready line")
    server = LocalServer(url, process)
    yield server
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        raise
