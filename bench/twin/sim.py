"""A discrete-event scheduler in virtual time for actors that run real, synchronous engine code.

Each actor (a broker handling one request, a puller, the coordinator) is a thread, but only one runs
at a time: the scheduler hands a baton to the actor with the earliest wake-up time and waits until it
sleeps again. Every AWS call the twin serves sleeps for its modelled latency, so the engine's
read-then-conditional-write races interleave with other actors exactly as far as the latencies say;
wall time never enters. The engine's own CPU time is not charged; a scenario charges a Lambda call's
handler CPU as a sleep inside its execution (`bench.twin.lambdas.Executions.compute`).

A lost baton would hang the run with every thread parked, so the scheduler checks what it must never
see (an actor queued twice or after its end, a sleep from an actor not holding the baton, twin calls
from a thread outside the actors while they run) and raises `SimError` naming the actor; a baton not
given back within `watchdog_s` of wall time writes every thread's stack to a file and raises.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import os
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from typing import Any

threading.stack_size(512 * 1024)  # thousands of actor threads: keep their stacks small


class SimError(RuntimeError):
    """The scheduler's invariants broke: the run's figures would be wrong, or it would hang."""


class Actor:
    def __init__(self, sim: Sim, name: str, region: str | None = None) -> None:
        self.sim = sim
        self.name = name
        self.region = region  # where this container runs: calls to other regions pay the round trip
        self.go = threading.Event()
        self.cache: dict[str, Any] = {}  # per-container caches (the shard-map mirror)
        self.done = False
        self.queued = False  # in the heap: an actor waits for one wake-up at a time


class Sim:
    def __init__(self, watchdog_s: float = 600.0) -> None:
        self.now = 0.0  # seconds
        self._heap: list[tuple[float, int, Actor]] = []
        self._seq = itertools.count()
        self._baton = threading.Event()
        self._local = threading.local()
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._running: Actor | None = None  # the actor holding the baton
        self.watchdog_s = watchdog_s
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
            if self._running is not None:
                self._fail(f"a twin call from thread {threading.current_thread().name}, outside the actors")
            return
        self._give_back(actor, self.now + max(0.0, seconds))

    def park(self) -> None:
        """Called from inside an actor: give the baton back until someone `wake`s it."""
        actor = self.current
        assert actor is not None
        self._give_back(actor, None)

    def wake(self, actor: Actor) -> None:
        self._push(self.now, actor)

    def monotonic(self) -> float:
        return self.now

    def _give_back(self, actor: Actor, until: float | None) -> None:
        if actor is not self._running:  # a re-entrant sleep (a finalizer's call) or a second runner
            running = self._running.name if self._running else "none"
            self._fail(f"actor {actor.name} slept while not holding the baton (running: {running})")
        self._running = None
        if until is not None:
            self._push(until, actor)
        actor.go.clear()
        self._baton.set()
        actor.go.wait()

    def _push(self, when: float, actor: Actor) -> None:
        if actor.queued or actor.done:
            self._fail(f"actor {actor.name} scheduled while {'ended' if actor.done else 'queued'}")
        actor.queued = True
        heapq.heappush(self._heap, (when, next(self._seq), actor))

    def _fail(self, message: str) -> None:
        """Raise, and keep the error for `run_until`: a finalizer's exception would be swallowed."""
        exc = SimError(message)
        self.error = self.error or exc
        raise exc

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
                self._running = None
                self._baton.set()

        threading.Thread(target=run, name=name, daemon=True).start()
        self._push(self.now if at is None else at, actor)
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
            actor.queued = False
            if actor.done:
                raise SimError(f"actor {actor.name} popped after its end")
            self._running = actor
            self._baton.clear()
            actor.go.set()
            if not self._baton.wait(self.watchdog_s):
                path = self._dump_stacks()
                raise SimError(f"actor {actor.name} kept the baton {self.watchdog_s:.0f} s; stacks: {path}")
            if self.error is not None:
                raise RuntimeError(f"actor {actor.name} failed") from self.error

    def _dump_stacks(self) -> str:
        """Every thread's stack, in a file. The collector stays off while the frames are taken: on
        CPython 3.11 a collection inside `sys._current_frames` deadlocks (cpython gh-106883)."""
        names = {t.ident: t.name for t in threading.enumerate()}
        gc.disable()
        try:
            frames = sys._current_frames()
        finally:
            gc.enable()
        fd, path = tempfile.mkstemp(prefix="sluice-twin-stacks-", suffix=".txt")
        with os.fdopen(fd, "w") as out:
            out.write(f"virtual time {self.now:.6f} s\n")
            for ident, frame in frames.items():
                out.write(f"\n--- thread {names.get(ident, ident)}\n")
                out.write("".join(traceback.format_stack(frame)))
        return path
