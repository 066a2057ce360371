"""What lies between the regions of `sluice local --regions`: distance and outages.

Every region's containers (and the runtime process) talk to one moto server, so nothing separates the
regions but the region a request is signed for. A botocore `before-send` hook on every client of
`sluice.adapters.aws` puts back what separates them on AWS:

- **distance**: a call to another region than the caller's (`SLUICE_REGION`) waits the inter-region
  delay first (`SLUICE_LOCAL_INTER_REGION_DELAY_MS`), per HTTP attempt, as a round trip would;
- **outages**: a call to a region that is down fails as botocore's `EndpointConnectionError`, the
  error an unreachable endpoint gives (botocore retries it, then the adapters map it to
  `DependencyUnavailable`), from any caller in any region.

Which regions are down is shared by every process through one small file (`SLUICE_LOCAL_OUTAGE_FILE`,
a JSON list) that `OutageSwitch` writes atomically; a hook re-reads it only when its inode, size or
mtime changed (one `stat` per call). Standard library and botocore only: containers import it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from botocore.exceptions import EndpointConnectionError

from sluice import constants as c
from sluice.adapters import aws


class OutageSwitch:
    """The set of regions that are down, in a file every process of the deployment reads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._down: frozenset[str] = frozenset()

    def down(self) -> frozenset[str]:
        """The regions down now (cheap: the file is parsed again only after it changed)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return frozenset()
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            if stamp != self._seen:
                try:
                    self._down = frozenset(json.loads(self.path.read_text() or "[]"))
                except (OSError, ValueError):  # replaced between stat and read: keep the last state
                    return self._down
                self._seen = stamp
            return self._down

    def is_down(self, region: str) -> bool:
        return region in self.down()

    def set(self, region: str, down: bool) -> frozenset[str]:
        """Mark `region` down or up; returns the regions down afterwards. Atomic for readers."""
        with self._lock:
            now = set(self._read())
            if down:
                now.add(region)
            else:
                now.discard(region)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps(sorted(now)))
            os.replace(tmp, self.path)  # a new inode: readers see the old list or the new one
            self._seen = None
        return self.down()

    def _read(self) -> list[str]:
        try:
            return list(json.loads(self.path.read_text() or "[]"))
        except FileNotFoundError:
            return []


_installed = False
_install_lock = threading.Lock()


def install_from_env() -> bool:
    """Hook every AWS client of this process when it serves a region of a multi-region `sluice local`
    (`SLUICE_REGION` and the outage file or a delay set); idempotent. True when hooked."""
    global _installed
    region = os.environ.get(c.ENV_REGION)
    outage_file = os.environ.get(c.ENV_LOCAL_OUTAGE_FILE)
    delay_ms = float(os.environ.get(c.ENV_LOCAL_INTER_REGION_DELAY_MS) or 0)
    if not region or not (outage_file or delay_ms):
        return False
    with _install_lock:
        if _installed:
            return True
        _installed = True
    aws.instrument(hook(region, delay_ms / 1000, OutageSwitch(outage_file) if outage_file else None))
    return True


def hook(own_region: str, delay_seconds: float, switch: OutageSwitch | None) -> Any:
    """The attacher `aws.instrument` takes: registers the distance-and-outage check on one client."""

    def attach(client: Any) -> None:
        target = client.meta.region_name or own_region

        def before_send(request: Any, **_: Any) -> None:
            if switch is not None and switch.is_down(target):
                raise EndpointConnectionError(endpoint_url=request.url)
            if delay_seconds and target != own_region:
                time.sleep(delay_seconds)

        client.meta.events.register("before-send", before_send, unique_id="sluice-interregion")

    return attach
