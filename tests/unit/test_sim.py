"""The twin's scheduler (bench/twin/sim.py) raises, naming the actor, where a broken invariant would
otherwise lose its baton and hang a run with every thread parked."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bench.twin.sim import Sim, SimError


def test_actors_take_turns_in_virtual_time() -> None:
    sim = Sim()
    seen: list[tuple[str, float]] = []

    def body(name: str, step: float) -> None:
        for _ in range(3):
            sim.sleep(step)
            seen.append((name, sim.now))

    sim.spawn("a", lambda: body("a", 1.0))
    sim.spawn("b", lambda: body("b", 1.5))
    sim.run_until(10.0)
    assert seen == [("a", 1.0), ("b", 1.5), ("a", 2.0), ("b", 3.0), ("a", 3.0), ("b", 4.5)]


def test_waking_a_queued_actor_raises() -> None:
    sim = Sim()
    sleeper = sim.spawn("sleeper", lambda: sim.sleep(5.0))
    sim.spawn("waker", lambda: sim.wake(sleeper), at=1.0)
    with pytest.raises(RuntimeError) as raised:
        sim.run_until(10.0)
    assert "sleeper scheduled while queued" in str(raised.value.__cause__)


def test_an_actor_popped_after_its_end_raises() -> None:
    sim = Sim()
    sim.spawn("quitter", lambda: sim.wake(sim.current))  # type: ignore[arg-type]
    with pytest.raises(SimError, match="quitter popped after its end"):
        sim.run_until(1.0)


def test_a_reentrant_sleep_raises() -> None:
    """As a finalizer making a twin call inside the sleep of the actor whose thread it runs on."""
    sim = Sim()

    def body() -> None:
        actor = sim.current
        assert actor is not None
        clear = actor.go.clear

        def clear_then_sleep() -> None:
            actor.go.clear = clear  # type: ignore[method-assign]
            sim.sleep(0.1)

        actor.go.clear = clear_then_sleep  # type: ignore[method-assign]
        sim.sleep(1.0)

    sim.spawn("nested", body)
    with pytest.raises(RuntimeError) as raised:
        sim.run_until(5.0)
    assert "nested slept while not holding the baton" in str(raised.value.__cause__)


def test_a_twin_call_from_a_thread_outside_the_actors_raises() -> None:
    sim = Sim()

    def stray() -> None:
        with pytest.raises(SimError):
            sim.sleep(0.1)

    def body() -> None:
        worker = threading.Thread(target=stray, name="stray")
        worker.start()
        worker.join()
        sim.sleep(1.0)

    sim.spawn("spawner", body)
    with pytest.raises(RuntimeError) as raised:
        sim.run_until(5.0)
    assert "from thread stray" in str(raised.value.__cause__)


def test_a_baton_kept_past_the_watchdog_dumps_the_stacks() -> None:
    sim = Sim(watchdog_s=0.2)
    release = threading.Event()

    def stuck() -> None:
        release.wait()  # blocks on something that is not the scheduler

    sim.spawn("stuck", stuck)
    with pytest.raises(SimError, match="stuck kept the baton") as raised:
        sim.run_until(1.0)
    release.set()
    path = Path(str(raised.value).rsplit("stacks: ", 1)[1])
    assert "--- thread stuck" in path.read_text()
    path.unlink()
