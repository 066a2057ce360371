"""The commit of a group's state on one shard: a conditional write on its version. A lost race hands
back the winner's state (the failed condition returns it: no re-read), with the purge floor applied,
and the caller decides again from it after a short random backoff."""

from __future__ import annotations

import random
from dataclasses import dataclass

from sluice import errors
from sluice.engine.clock import Clock
from sluice.engine.groupstate import GroupState
from sluice.engine.shardstate import apply_floor
from sluice.engine.store import Head, ShardAddress, ShardStore, StateConflict

MAX_COMMIT_ATTEMPTS = 30


@dataclass
class GroupView:
    """One group's state on one shard as a puller or acker works on it."""

    address: ShardAddress
    head: Head
    state: GroupState
    dirty: bool = False  # the state changed and must be committed

    @property
    def work(self) -> int:
        """Unread messages plus pending ones (in flight, delayed)."""
        return self.head.next - self.state.read + len(self.state.pending)


class StateCommit:
    def __init__(self, store: ShardStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def backoff(self, attempt: int) -> None:
        if attempt:
            self.clock.sleep(random.uniform(0, 0.002 * min(attempt, 10)))

    def save(self, view: GroupView, group: str, old_version: int) -> bool:
        """Commit `view.state` over `old_version`. False: lost; `view` now holds the winner's state."""
        try:
            self.store.commit_state(view.address, group, view.state, old_version)
        except StateConflict as exc:
            view.state = exc.winner
            view.dirty = apply_floor(view.state, view.head.floor)
            return False
        view.state.version = old_version + 1
        return True

    @staticmethod
    def exhausted(what: str) -> errors.Throttled:
        return errors.Throttled(f"too many consumers are {what} this shard at once; retry shortly")
