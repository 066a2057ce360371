"""Ownership of one control item for a while: the coordinator's (one pass runner at a time) and push
workers' slots (at most `max_concurrency` workers per consumer).

Not to be confused with a message lease (`sluice.leases.Lease`, a signed delivery id): an ownership is
a row that says who runs something. It is taken with one conditional write when the item is absent,
expired or released; renewed and released only by the holder whose token is still the stored one. The
token grows with every new owner, so it doubles as a fencing token (see the coordinator).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from sluice.adapters.dynamo import ConditionFailed, Table
from sluice.engine import keys

log = logging.getLogger(__name__)

_NAMES = {
    "#h": keys.OWNER_HOLDER,
    "#e": keys.OWNER_EXPIRES_MS,
    "#r": keys.OWNER_RELEASED,
    "#t": keys.OWNER_TOKEN,
}


class Ownership:
    """Holder `holder` of item (`pk`, `sk`) in `table` for `ttl_ms` at a time. With `item_ttl_s`, the
    item also gets the table's TTL attribute that long after it expires (slots: nothing outlives use)."""

    def __init__(
        self,
        table: Table,
        pk: str,
        sk: str,
        holder: str,
        ttl_ms: int,
        clock: Callable[[], int],
        *,
        item_ttl_s: int | None = None,
    ) -> None:
        self.table, self.pk, self.sk = table, pk, sk
        self.holder = holder
        self.ttl_ms = ttl_ms
        self.clock = clock
        self.item_ttl_s = item_ttl_s
        self.token: int | None = None
        self.expires_ms = 0
        self.took_over_expired = False  # the previous holder did not release: it may still be running
        self.seen: dict[str, Any] = {}  # the item as it was when we could not take it

    def valid(self) -> bool:
        """Still ours by our own clock, with a margin so we stop before anyone else may start."""
        return self.token is not None and self.clock() < self.expires_ms - self.ttl_ms // 10

    def acquire(self) -> bool:
        """Renew when held, otherwise take."""
        return (self.token is not None and self.renew()) or self.take()

    def take(self) -> bool:
        now = self.clock()
        expires = now + self.ttl_ms
        update = "SET #h = :me, #e = :e, #r = :f, #t = if_not_exists(#t, :z) + :one"
        values: dict[str, Any] = {":me": self.holder, ":e": expires, ":f": False, ":z": 0, ":one": 1}
        names = dict(_NAMES)
        if self.item_ttl_s is not None:
            update += ", #x = :x"
            names["#x"], values[":x"] = keys.TTL, expires // 1000 + self.item_ttl_s
        try:
            old = self.table.update(
                self.pk,
                self.sk,
                update,
                condition=f"{keys.NEW_ITEM} OR #e < :now OR #r = :true",
                names=names,
                values={**values, ":now": now, ":true": True},
                returns="ALL_OLD",
            )
        except ConditionFailed as exc:
            self.token = None
            self.seen = exc.item or self.table.get(self.pk, self.sk) or {}
            return False
        old = old or {}
        self.token = int(old.get(keys.OWNER_TOKEN, 0)) + 1
        self.expires_ms = expires
        self.took_over_expired = (
            bool(old) and not old.get(keys.OWNER_RELEASED) and old.get(keys.OWNER_HOLDER) != self.holder
        )
        return True

    def renew(self) -> bool:
        """Push the expiry out; False (and no longer held) when someone else took the item."""
        if self.token is None:
            return False
        expires = self.clock() + self.ttl_ms
        update, names = "SET #e = :e, #r = :f", dict(_NAMES)
        values: dict[str, Any] = {":e": expires, ":f": False, ":me": self.holder, ":tok": self.token}
        if self.item_ttl_s is not None:
            update += ", #x = :x"
            names["#x"], values[":x"] = keys.TTL, expires // 1000 + self.item_ttl_s
        try:
            self.table.update(
                self.pk, self.sk, update, condition="#h = :me AND #t = :tok", names=names, values=values
            )
        except ConditionFailed as exc:
            log.warning("%s lost %s/%s (token %s): %s", self.holder, self.pk, self.sk, self.token, exc.item)
            self.token = None
            return False
        self.expires_ms, self.took_over_expired = expires, False
        return True

    def release(self) -> None:
        """Free the item for the next taker at once (its token stays, for fencing)."""
        if self.token is None:
            return
        with contextlib.suppress(ConditionFailed):
            self.table.update(
                self.pk,
                self.sk,
                "SET #r = :true, #e = :z",
                condition="#h = :me AND #t = :tok",
                names=_NAMES,
                values={":true": True, ":z": 0, ":me": self.holder, ":tok": self.token},
            )
        self.token = None
