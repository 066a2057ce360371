"""A discrete-event scheduler in virtual time for actors that run real, synchronous engine code.

Each actor (a broker handling one request, a puller, the coordinator) is a thread, but only one runs
at a time: the scheduler hands a baton to the actor with the earliest wake-up time and waits until it
sleeps again. Every AWS call the twin serves sleeps for its modelled latency, so the engine's
read-then-conditional-write races interleave with other actors exactly as far as the latencies say;
wall time never enters. Engine CPU time is not charged (Lambda compute is outside the model).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from typing import Any

threading.stack_size(512 * 1024)  # thousands of actor threads: keep their stacks small


class Actor:
    def __init__(self, sim: Sim, name: str, region: str | None = None) -> None:
        self.sim = sim
        self.name = name
        self.region = region  # where this container runs: calls to other regions pay the round trip
        self.go = threading.Event()
        self.cache: dict[str, Any] = {}  # per-container caches (the shard-map mirror)
        self.done = False


class Sim:
    def __init__(self) -> None:
        self.now = 0.0  # seconds
        self._heap: list[tuple[float, int, Actor]] = []
        self._seq = itertools.count()
        self._baton = threading.Event()
        self._local = threading.local()
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self.error: BaseException | None = None

    # -- time --

    def now_ms(self) -> int:
        return int(self.now * 1000)

    @property
    def current(self) -> Actor | None:
        return getattr(self._local, "actor", None)

    def sleep(self, seconds: float) -> None:
        """Called from inside an actor: give the baton back until `seconds` of virtual time passed."""
        actor = self.current
        if actor is None:  # set-up code outside any actor: time does not move
            return
        heapq.heappush(self._heap, (self.now + max(0.0, seconds), next(self._seq), actor))
        actor.go.clear()
        self._baton.set()
        actor.go.wait()

    def park(self) -> None:
        """Called from inside an actor: give the baton back until someone `wake`s it."""
        actor = self.current
        assert actor is not None
        actor.go.clear()
        self._baton.set()
        actor.go.wait()

    def wake(self, actor: Actor) -> None:
        heapq.heappush(self._heap, (self.now, next(self._seq), actor))

    def monotonic(self) -> float:
        return self.now

    # -- actors and timers --

    def spawn(
        self, name: str, body: Callable[[], None], at: float | None = None, region: str | None = None
    ) -> Actor:
        actor = Actor(self, name, region)

        def run() -> None:
            actor.go.wait()
            self._local.actor = actor
            try:
                body()
            except BaseException as exc:
                self.error = self.error or exc
            finally:
                actor.done = True
                self._baton.set()

        threading.Thread(target=run, name=name, daemon=True).start()
        heapq.heappush(self._heap, (self.now if at is None else at, next(self._seq), actor))
        return actor

    def at(self, when: float, callback: Callable[[], None]) -> None:
        """A callback run by the scheduler itself (arrivals, sampling): it must not sleep."""
        heapq.heappush(self._timers, (when, next(self._seq), callback))

    def run_until(self, end: float) -> None:
        while True:
            t_actor = self._heap[0][0] if self._heap else float("inf")
            t_timer = self._timers[0][0] if self._timers else float("inf")
            t = min(t_actor, t_timer)
            if t > end:
                self.now = end
                return
            self.now = t
            if t_timer <= t_actor:
                _, _, callback = heapq.heappop(self._timers)
                callback()
                continue
            _, _, actor = heapq.heappop(self._heap)
            self._baton.clear()
            actor.go.set()
            self._baton.wait()
            if self.error is not None:
                raise RuntimeError(f"actor {actor.name} failed") from self.error
