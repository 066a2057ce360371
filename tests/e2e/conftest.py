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
    token: str = E2E_TOKEN

    def client(self, token: str = E2E_TOKEN) -> SluiceClient:
        return SluiceClient(self.url, token)


def start_local_server(*extra_args: str, token: str = E2E_TOKEN) -> LocalServer:
    """`sluice local` on a free port (with `extra_args`), once it printed its ready line."""
    # A clean environment, but the IAM call audit (tests/conftest.py) records this server's calls too.
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_") or k == c.ENV_IAM_AUDIT_FILE}
    process = subprocess.Popen(
        [sys.executable, "-m", "sluice.cli", "local", "--port", "0", "--admin-token", token, *extra_args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,  # its own process group: a kill on timeout takes its containers too
    )
    deadline = time.monotonic() + 90
    url = None
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        found = re.fullmatch(r"sluice local ready on (http://\S+)( \(.*)?\n", line)  # --regions: the home
        if found:
            url = found.group(1)
            break
    if url is None:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail("sluice local did not print its ready line")
    return LocalServer(url, process, token)


def stop_local_server(server: LocalServer) -> None:
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(server.process.pid, signal.SIGKILL)  # no orphaned containers left running
        raise


def worker_pids(parent: int) -> list[int]:
    """The Lambda containers (spawned worker processes) of a `sluice local` process."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"spawn_main" in cmdline:
            pids.append(int(entry))
    return pids


@pytest.fixture(scope="session")
def local_server() -> Iterator[LocalServer]:
    server = start_local_server()
    yield server
    stop_local_server(server)
