"""A response's byte budget. Synchronous Lambda responses stop at 6 MB (API Gateway turns a larger one
into a 500), so pulls and stream reads return fewer items instead. The caller (the face) knows how an
item is encoded and passes `size_of`; the engine asks before it leases or returns anything, so what
does not fit is never leased and stays available for the next call. The first item is always
admitted: a call must make progress (one message is at most 1 MiB before encoding)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class ByteBudget:
    limit: int
    size_of: Callable[[Any], int]
    used: int = 0
    count: int = 0
    full: bool = False  # an item was refused: stop looking for more

    def admit(self, item: Any) -> bool:
        size = self.size_of(item)
        if self.count and self.used + size > self.limit:
            self.full = True
            return False
        self.used += size
        self.count += 1
        return True

    def mark(self) -> tuple[int, int, bool]:
        return self.used, self.count, self.full

    def reset(self, mark: tuple[int, int, bool]) -> None:
        """Back to `mark`: the items admitted since were not returned after all (a lost state race)."""
        self.used, self.count, self.full = mark
