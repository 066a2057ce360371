"""Time, handed to the engine instead of read from `time`: the twin runs the same code in virtual time.

`clock()` is the wall clock in epoch milliseconds (what items and leases are stamped with);
`monotonic()` measures waits and deadlines; `sleep()` waits (long-poll rounds, commit backoff). A bare
`() -> int` is accepted where a clock is expected (tests pass fake wall clocks): it gets the process's
own monotonic clock and sleep.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Clock:
    now_ms: Callable[[], int] = wall_ms
    monotonic: Callable[[], float] = field(default=time.monotonic)
    sleep: Callable[[float], None] = field(default=time.sleep)

    def __call__(self) -> int:
        return self.now_ms()

    @classmethod
    def of(cls, clock: Clock | Callable[[], int]) -> Clock:
        return clock if isinstance(clock, Clock) else cls(now_ms=clock)


SYSTEM = Clock()
