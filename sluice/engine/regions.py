"""Regions of a multi-region deployment as the data plane sees them: which shards a broker writes
(`send_shards`, `key_shards`), the order a pull reads them in (`by_region`), and a per-process circuit
breaker per region (`RegionBreaker`).

A region whose calls fail with `errors.DependencyUnavailable` (connection refused or timed out, 5xx
after the SDK's retries) is skipped for `COOLDOWN_S`: pulls answer from the other regions instead of
paying the unreachable region's timeouts on every call, and an ack for one of its shards fails at once
with a retryable `DependencyUnavailable` (503). After the cool-down the next call tries it again. In a
single-region deployment nothing is ever skipped: a failure surfaces as it always did.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from sluice import errors
from sluice.engine.backend import Backend
from sluice.engine.clock import SYSTEM
from sluice.models import Queue, Shard

logger = logging.getLogger(__name__)

COOLDOWN_S = 5.0
_warned: set[tuple[str, str | None, str]] = set()  # fallbacks logged once per process (hot path)


class RegionBreaker:
    """Per-region cool-downs, shared by the threads of one process."""

    def __init__(self, cooldown_s: float = COOLDOWN_S, clock: Callable[[], float] = SYSTEM.monotonic) -> None:
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._until: dict[str, float] = {}

    def allows(self, region: str | None) -> bool:
        """False while `region` cools down after a failure (None, a single region: always True)."""
        if region is None:
            return True
        with self._lock:
            return self._clock() >= self._until.get(region, 0.0)

    def trip(self, region: str | None) -> None:
        if region is None:
            return
        with self._lock:
            self._until[region] = self._clock() + self.cooldown_s
        logger.warning("region %s is unreachable; skipped for %.0f s", region, self.cooldown_s)

    def check(self, region: str | None) -> None:
        """Raise the retryable error at once while `region` cools down."""
        if not self.allows(region):
            raise errors.DependencyUnavailable(
                f"region {region} is unreachable; retry shortly", retry_after_seconds=int(self.cooldown_s)
            )

    @contextmanager
    def guard(self, region: str | None) -> Iterator[None]:
        """Fail fast while `region` cools down; a `DependencyUnavailable` inside starts a cool-down."""
        self.check(region)
        try:
            yield
        except errors.DependencyUnavailable:
            self.trip(region)
            raise


def region_key(backend: Backend, shard: Shard) -> str | None:
    """The shard's region for breaker purposes: None in a single-region deployment (never skipped)."""
    return backend.region_of(shard) if backend.settings.multi_region else None


def by_region(backend: Backend, shards: Sequence[Shard]) -> list[tuple[str | None, list[Shard]]]:
    """`shards` grouped by region, this process's region first, then the deployment's order."""
    order = [backend.region, *backend.settings.regions]
    groups: dict[str | None, list[Shard]] = {}
    for shard in shards:
        groups.setdefault(region_key(backend, shard), []).append(shard)
    return sorted(groups.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))


def send_shards(backend: Backend, queue: Queue) -> list[Shard]:
    """Where an unordered send may go: the open shards of this process's region. A region with none
    (a queue its coordinator has not given shards yet) sends to the others' rather than failing."""
    local = [s for s in queue.open_shards if backend.is_local(s)]
    if local or not queue.open_shards:
        return local
    _warn_once(
        (queue.name, backend.region, "send"),
        "queue %s has no open shard in region %s; sending to another region",
    )
    return queue.open_shards


def key_shards(backend: Backend, queue: Queue) -> list[Shard]:
    """Where a partition key lives (ordered queues, streams): the home region's open shards, the one
    set every broker agrees on without a lookup. Without any there, every open shard (logged)."""
    home = backend.settings.home_region
    shards = [s for s in queue.shards_in(home, home) if s.state == "open"]
    if shards or not queue.open_shards:
        return shards
    _warn_once(
        (queue.name, home, "key"), "queue %s has no open shard in the home region %s; hashing over all"
    )
    return queue.open_shards


def _warn_once(what: tuple[str, str | None, str], message: str) -> None:
    if what not in _warned:
        _warned.add(what)
        logger.warning(message, what[0], what[1])
