"""Named crash points for fault-injection tests: a no-op unless a test arms the point."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

_armed: set[str] = set()

PUBLISH_AFTER_ALLOCATE = "publish.after_allocate"
DLQ_AFTER_WRITE = "dlq.after_write"
REDRIVE_AFTER_WRITE = "redrive.after_write"


class InjectedCrash(BaseException):
    """Simulates the process dying at a crash point."""


def crash_point(name: str) -> None:
    if name in _armed:
        raise InjectedCrash(name)


@contextmanager
def armed(name: str) -> Iterator[None]:
    _armed.add(name)
    try:
        yield
    finally:
        _armed.discard(name)
