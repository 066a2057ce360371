"""Waking the coordinator when shards throttle, instead of waiting for its next scheduled run.

The minute rule runs one short pass when nothing happens (docs/design.md "Coordinator"). A broker whose
allocation was throttled calls `Waker.wake`: one conditional write on the region's wake item
(`COORDINATOR` / `WAKE[#<region>]`: `at` older than `DEDUPE_MS`) lets one broker of the whole fleet
through, which invokes the coordinator asynchronously (`CoordinatorEvent` with `woken_by`). A running
coordinator touches the item on every pass, so nobody wakes it while it loops; each process also tries
at most once per `DEDUPE_MS`, so a throttled fleet does not hammer the item.
"""

from __future__ import annotations

import logging
import threading

from sluice.adapters.dynamo import ConditionFailed
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.engine.invoker import Invoker
from sluice.events import CoordinatorEvent

log = logging.getLogger(__name__)

DEDUPE_MS = 10_000


def wake_key(region: str | None) -> tuple[str, str]:
    return keys.COORDINATOR_PK, keys.coordinator_ownership_sk(keys.COORDINATOR_WAKE_SK, region)


class Waker:
    def __init__(self, backend: Backend, invoker: Invoker | None, function: str | None) -> None:
        self.backend = backend
        self.invoker = invoker
        self.function = function
        self._lock = threading.Lock()
        self._tried_at = -DEDUPE_MS
        self.woken = 0

    def wake(self, queue_name: str) -> bool:
        """Start the coordinator unless it runs, or was woken, within `DEDUPE_MS`; True when this call
        started it. Without an invoker or a function name (tools, tests) nothing happens."""
        if self.invoker is None or not self.function:
            return False
        now = self.backend.clock()
        with self._lock:
            if now - self._tried_at < DEDUPE_MS:
                return False
            self._tried_at = now
        pk, sk = wake_key(self.backend.settings.region if self.backend.settings.multi_region else None)
        try:
            self.backend.control.update(
                pk,
                sk,
                "SET #at = :now",
                condition="attribute_not_exists(#at) OR #at <= :cutoff",
                names={"#at": keys.WAKE_AT},
                values={":now": now, ":cutoff": now - DEDUPE_MS},
            )
        except ConditionFailed:
            return False  # woken or running already
        except Exception as exc:  # waking is an optimisation: the minute rule still runs
            log.warning("could not wake the coordinator: %s", exc)
            return False
        self.invoker.invoke_async(self.function, CoordinatorEvent(woken_by=queue_name).to_payload())
        self.woken += 1
        log.info("queue %s: shards throttled; woke the coordinator", queue_name)
        return True


def touch(backend: Backend, region: str | None, at_ms: int) -> None:
    """The coordinator's pass: a wake within `DEDUPE_MS` of `at_ms` is refused (it runs already).
    `at_ms` 0 clears it (the run stops: the next throttle may wake it at once)."""
    pk, sk = wake_key(region)
    backend.control.put({keys.PK: pk, keys.SK: sk, keys.WAKE_AT: at_ms})
