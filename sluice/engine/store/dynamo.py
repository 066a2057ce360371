"""The shard store on DynamoDB: the shard tables' items, keys and expressions (schema in engine/keys.py).

Every read of a batch item is decoded here, once per process (items never change; a bounded cache of
decoded batches saves the consumer re-decoding an item it leases from in parts).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any

from sluice import codec, errors
from sluice.adapters.dynamo import ConditionFailed, Table, batch_delete, batch_get_across, batch_get_available
from sluice.codec import StoredMessage
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.engine.groupstate import GroupState
from sluice.engine.payloads import ItemMessages
from sluice.engine.store.items import (
    Allocation,
    AllocationRefused,
    BatchItem,
    Head,
    HeadCounts,
    HeadGuard,
    InlinePayload,
    ObjectPayload,
    ShardAddress,
    ShardView,
    SlotTaken,
    StateConflict,
)

MAX_BATCH_KEYS = 100  # BatchGetItem's limit
TOMBSTONE_TTL_SECONDS = 86_400  # gap tombstones outlive any writer's stall by far
_DECODED_ITEMS = 512  # decoded batch items kept per process

Item = dict[str, Any]


def head_of(item: Item | None) -> Head:
    exists = bool(item)
    item = item or {}
    return Head(
        next=int(item.get(keys.HEAD_NEXT, 0)),
        ts=int(item.get(keys.HEAD_TS, 0)),
        floor=int(item.get(keys.HEAD_FLOOR, 0)),
        sealed=bool(item.get(keys.HEAD_SEALED)),
        flushed=int(item.get(keys.HEAD_FLUSHED, 0)),
        ttl_set=int(item.get(keys.HEAD_TTL_SET, 0)),
        producer_version=int(item.get(keys.HEAD_PRODUCER_VERSION, 0)),
        map_version=int(item.get(keys.HEAD_MAP_VERSION, 0)),
        map_route=str(item.get(keys.HEAD_MAP_ROUTE, "")),
        counters=tuple(int(item.get(attr, 0)) for attr in keys.HEAD_COUNTERS),
        exists=exists,
    )


def batch_item_of(item: Item) -> BatchItem:
    data = item.get(keys.ITEM_DATA)
    payload: InlinePayload | ObjectPayload | None = None
    if keys.ITEM_PAYLOAD in item:
        base = int(item.get(keys.ITEM_PAYLOAD_BASE, 0))
        payload = ObjectPayload(str(item[keys.ITEM_PAYLOAD]), bytes(data or b""), base)
    elif data is not None:
        payload = InlinePayload(bytes(data))
    exp = item.get(keys.TTL)
    return BatchItem(
        first=keys.seq_of(item[keys.SK]),
        count=int(item[keys.ITEM_COUNT]),
        ts=int(item[keys.ITEM_TS]),
        gap=bool(item.get(keys.ITEM_GAP)),
        payload=payload,
        expires_s=None if exp is None else int(exp),
    )


def state_of(item: Item | None) -> GroupState:
    """A group state item decoded; absent: a group that never read this shard."""
    if item is None:
        return GroupState()
    return GroupState.decode(bytes(item[keys.STATE_BLOB]), int(item[keys.STATE_VERSION]))


class DynamoShardStore:
    def __init__(
        self,
        backend: Backend,
        *,
        encode: Callable[[Iterable[StoredMessage]], bytes] = codec.encode_batch,
        decode: Callable[[bytes], Iterable[StoredMessage]] = codec.decode_batch,
    ) -> None:
        self.backend = backend
        self._encode = encode
        self._decode = decode
        self._lock = threading.Lock()
        self._decoded: OrderedDict[tuple[str, int], list[StoredMessage]] = OrderedDict()

    def _table(self, at: ShardAddress) -> Table:
        return self.backend.table_for(at.shard)

    # --- HEAD ---------------------------------------------------------------------------------------------

    def head(self, at: ShardAddress) -> Head:
        return head_of(self._table(at).get(at.pk, keys.HEAD_SK))

    def allocate(
        self,
        at: ShardAddress,
        count: int,
        now_ms: int,
        counts: HeadCounts,
        *,
        producer_version: int | None = None,
        guard: HeadGuard | None = None,
        fail_fast: bool = False,
    ) -> Allocation:
        expression = "SET #n = if_not_exists(#n, :zero) + :count, #ts = :now"
        condition = "attribute_not_exists(#sealed) AND (attribute_not_exists(#ts) OR #ts <= :now)"
        names = {"#n": keys.HEAD_NEXT, "#ts": keys.HEAD_TS, "#sealed": keys.HEAD_SEALED}
        values: dict[str, Any] = {":zero": 0, ":count": count, ":now": now_ms}
        if producer_version is not None:
            expression += ", #pv = :pv"
            condition += " AND (attribute_not_exists(#pv) OR #pv <= :pv)"
            names["#pv"] = keys.HEAD_PRODUCER_VERSION
            values[":pv"] = producer_version
        if guard is not None:
            names["#gf"] = guard.field
            if guard.expected is None:
                condition += " AND attribute_not_exists(#gf)"
            else:
                condition += " AND #gf = :gexp"
                values[":gexp"] = guard.expected
            for index, (attr, value) in enumerate(guard.updates.items()):
                names[f"#g{index}"], values[f":g{index}"] = attr, value
                expression += f", #g{index} = :g{index}"
        expression += _counter_clause(counts, names, values)
        call = partial(
            self._table(at).update,
            at.pk,
            keys.HEAD_SK,
            expression,
            condition=condition,
            names=names,
            values=values,
            returns="ALL_NEW",  # the whole HEAD: the map version stamped on it comes back too
        )
        try:
            try:
                new = call(fail_fast=fail_fast)
            except errors.DependencyUnavailable:
                if not fail_fast:
                    raise
                new = call()  # fail-fast skips throttle retries only: an outage (5xx) is retried
        except ConditionFailed as exc:
            old = exc.item or {}
            guard_value = old.get(guard.field) if guard is not None else None
            raise AllocationRefused(head_of(old), None if guard_value is None else int(guard_value)) from exc
        head = head_of(new)
        return Allocation(head.next - count, now_ms, head.map_version, head.map_route)

    def stamp_map(self, at: ShardAddress, version: int, route: str) -> bool:
        try:
            self._table(at).update(
                at.pk,
                keys.HEAD_SK,
                "SET #mv = :v, #mo = :r",
                condition="attribute_not_exists(#mv) OR #mv < :v",
                names={"#mv": keys.HEAD_MAP_VERSION, "#mo": keys.HEAD_MAP_ROUTE},
                values={":v": version, ":r": route},
                fail_fast=True,  # a hot HEAD: the next pass stamps it (meanwhile the route item tells)
            )
        except ConditionFailed:
            return False
        return True

    def set_floor(self, at: ShardAddress) -> None:
        self._table(at).update(
            at.pk,
            keys.HEAD_SK,
            "SET #f = if_not_exists(#n, :zero)",
            names={"#f": keys.HEAD_FLOOR, "#n": keys.HEAD_NEXT},
            values={":zero": 0},
        )

    def seal(self, at: ShardAddress, now_ms: int) -> None:
        self._table(at).update(
            at.pk,
            keys.HEAD_SK,
            "SET #s = :t, #sm = if_not_exists(#sm, :now)",
            names={"#s": keys.HEAD_SEALED, "#sm": keys.HEAD_SEALED_MS},
            values={":t": True, ":now": now_ms},
        )

    def mark_flushed(self, at: ShardAddress, old: int, new: int) -> bool:
        try:
            self._table(at).update(
                at.pk,
                keys.HEAD_SK,
                "SET #f = :end",
                condition="attribute_not_exists(#f) OR #f = :old",
                names={"#f": keys.HEAD_FLUSHED},
                values={":end": new, ":old": old},
            )
        except ConditionFailed:
            return False
        return True

    def mark_ttl_set(self, at: ShardAddress, end: int) -> None:
        with contextlib.suppress(ConditionFailed):  # a newer flush already set more
            self._table(at).update(
                at.pk,
                keys.HEAD_SK,
                "SET #t = :end",
                condition="attribute_not_exists(#t) OR #t < :end",
                names={"#t": keys.HEAD_TTL_SET},
                values={":end": end},
            )

    # --- batch items --------------------------------------------------------------------------------------

    def write_batch(
        self,
        at: ShardAddress,
        first: int,
        timestamp_ms: int,
        messages: Sequence[StoredMessage],
        expires_s: int | None,
        *,
        object_key: str | None = None,
        object_base: int = 0,
    ) -> None:
        item: Item = {
            keys.PK: at.pk,
            keys.SK: keys.msg_sk(first),
            keys.ITEM_COUNT: len(messages),
            keys.ITEM_TS: timestamp_ms,
            keys.ITEM_DATA: self._encode(messages),
        }
        if object_key is not None:
            item[keys.ITEM_PAYLOAD] = object_key
            if object_base:
                item[keys.ITEM_PAYLOAD_BASE] = object_base
        if expires_s is not None:
            item[keys.TTL] = expires_s
        try:
            self._table(at).put(item, condition=keys.NEW_ITEM)
        except ConditionFailed as exc:
            raise SlotTaken from exc

    def seal_gap(self, at: ShardAddress, start: int, end: int, now_ms: int) -> bool:
        ttl = now_ms // 1000 + TOMBSTONE_TTL_SECONDS
        table = self._table(at)
        for seq in range(start, end):
            try:
                table.put(
                    {
                        keys.PK: at.pk,
                        keys.SK: keys.msg_sk(seq),
                        keys.ITEM_COUNT: 1,
                        keys.ITEM_TS: 0,
                        keys.ITEM_GAP: True,
                        keys.TTL: ttl,
                    },
                    condition=keys.NEW_ITEM,
                )
            except ConditionFailed:
                return False
        return True

    def scan(
        self, at: ShardAddress, from_seq: int, *, to_seq: int | None = None, limit: int | None = None
    ) -> Iterator[BatchItem]:
        upper = keys.MSG_SK_END if to_seq is None else keys.msg_sk(to_seq)
        for item in self._table(at).query(
            at.pk, sk_from=keys.msg_sk(max(0, from_seq)), sk_to=upper, limit=limit
        ):
            yield batch_item_of(item)

    def item_before(self, at: ShardAddress, seq: int) -> BatchItem | None:
        found = self._table(at).query(
            at.pk, sk_from=keys.MSG_SK_PREFIX, sk_to=keys.msg_sk(seq), forward=False, limit=1
        )
        item = next(iter(found), None)
        return None if item is None else batch_item_of(item)

    def items(
        self, at: ShardAddress, firsts: Iterable[int], *, consistent: bool = True
    ) -> dict[int, BatchItem]:
        starts = sorted(set(firsts))
        table = self._table(at)
        out: dict[int, BatchItem] = {}
        for lo in range(0, len(starts), MAX_BATCH_KEYS):
            chunk = [(at.pk, keys.msg_sk(s)) for s in starts[lo : lo + MAX_BATCH_KEYS]]
            for item in batch_get_across({table: chunk}, consistent=consistent).values():
                batch = batch_item_of(item)
                out[batch.first] = batch
        return out

    def items_available(self, wanted: Sequence[tuple[ShardAddress, int]]) -> dict[tuple[str, int], BatchItem]:
        out: dict[tuple[str, int], BatchItem] = {}
        for lo in range(0, len(wanted), MAX_BATCH_KEYS):
            requests: dict[Table, list[tuple[str, str]]] = {}
            for at, first in wanted[lo : lo + MAX_BATCH_KEYS]:
                requests.setdefault(self._table(at), []).append((at.pk, keys.msg_sk(first)))
            found, _ = batch_get_available(requests, consistent=False)
            for (_, pk, _), item in found.items():
                batch = batch_item_of(item)
                out[(pk, batch.first)] = batch
        return out

    def set_expiry(self, at: ShardAddress, first: int, expires_s: int) -> bool:
        try:
            self._table(at).update(
                at.pk,
                keys.msg_sk(first),
                "SET #e = :e",
                condition=keys.ITEM_EXISTS,
                names={"#e": keys.TTL},
                values={":e": expires_s},
            )
        except ConditionFailed:
            return False
        return True

    def delete_items(self, at: ShardAddress, firsts: Sequence[int]) -> None:
        batch_delete(self._table(at), [(at.pk, keys.msg_sk(f)) for f in firsts])

    def messages(self, at: ShardAddress, item: BatchItem) -> Sequence[StoredMessage]:
        if item.gap or item.payload is None:
            return []
        if isinstance(item.payload, ObjectPayload):  # not cached: its bodies are up to 4 MiB
            payload = item.payload
            bucket = self.backend.bucket_for(at.shard)
            return ItemMessages(bucket.get_range, payload.key, payload.base, self._decode(payload.index))
        cache_key = (at.pk, item.first)
        with self._lock:
            hit = self._decoded.get(cache_key)
            if hit is not None and len(hit) == item.count:
                self._decoded.move_to_end(cache_key)
                return hit
        decoded = list(self._decode(item.payload.data))
        with self._lock:
            self._decoded[cache_key] = decoded
            while len(self._decoded) > _DECODED_ITEMS:
                self._decoded.popitem(last=False)
        return decoded

    def body_sizes(self, at: ShardAddress, item: BatchItem) -> list[int]:
        if isinstance(item.payload, ObjectPayload):
            return [m.body_size for m in self._decode(item.payload.index)]
        return [m.body_size for m in self.messages(at, item)]

    def body(self, at: ShardAddress, message: StoredMessage) -> bytes:
        if not message.overflow_key:
            return message.body
        return self.backend.bucket_for(at.shard).get(message.overflow_key) or b""

    # --- consumer-group states ----------------------------------------------------------------------------

    def read_states(
        self, ats: Sequence[ShardAddress], groups: Sequence[str], *, partial: bool = False
    ) -> tuple[list[ShardView], list[ShardAddress]]:
        per_call = max(1, MAX_BATCH_KEYS // (1 + len(groups)))
        views: list[ShardView] = []
        unread: list[ShardAddress] = []
        for start in range(0, len(ats), per_call):
            chunk = ats[start : start + per_call]
            requests: dict[Table, list[tuple[str, str]]] = {}
            for at in chunk:
                requests.setdefault(self._table(at), []).extend(
                    [(at.pk, keys.HEAD_SK), *((at.pk, keys.group_state_sk(g)) for g in groups)]
                )
            if partial:
                items, missed = batch_get_available(requests)
            else:
                items, missed = batch_get_across(requests), set()
            missed_pks = {(table_name, pk) for table_name, pk, _ in missed}
            for at in chunk:
                name = self._table(at).name
                if (name, at.pk) in missed_pks:
                    unread.append(at)
                    continue
                states = {g: state_of(items.get((name, at.pk, keys.group_state_sk(g)))) for g in groups}
                views.append(ShardView(at, head_of(items.get((name, at.pk, keys.HEAD_SK))), states))
        return views, unread

    def read_every_state(self, at: ShardAddress) -> ShardView:
        # One Query: `G#…` sorts just before `HEAD`.
        found = self._table(at).query(
            at.pk, sk_from=keys.GROUP_STATE_SK_PREFIX, sk_to=keys.HEAD_SK, consistent=True
        )
        view = ShardView(at, Head())
        for item in found:
            sk = item[keys.SK]
            if sk == keys.HEAD_SK:
                view.head = head_of(item)
            elif sk.startswith(keys.GROUP_STATE_SK_PREFIX):
                view.states[sk[len(keys.GROUP_STATE_SK_PREFIX) :]] = state_of(item)
        return view

    def commit_state(self, at: ShardAddress, group: str, state: GroupState, old_version: int) -> None:
        item = {
            keys.PK: at.pk,
            keys.SK: keys.group_state_sk(group),
            keys.STATE_VERSION: old_version + 1,
            keys.STATE_BLOB: state.encode(),
        }
        try:
            if old_version == 0:
                self._table(at).put(item, condition=keys.NEW_ITEM)
            else:
                self._table(at).put(item, condition=f"{keys.STATE_VERSION} = :v", values={":v": old_version})
        except ConditionFailed as exc:
            raise StateConflict(state_of(exc.item)) from exc

    def put_state(self, at: ShardAddress, group: str, state: GroupState) -> None:
        self._table(at).put(
            {
                keys.PK: at.pk,
                keys.SK: keys.group_state_sk(group),
                keys.STATE_VERSION: max(1, state.version),
                keys.STATE_BLOB: state.encode(),
            }
        )

    def delete_state(self, at: ShardAddress, group: str) -> None:
        self._table(at).delete(at.pk, keys.group_state_sk(group))


def _counter_clause(counts: HeadCounts, names: dict[str, str], values: dict[str, Any]) -> str:
    """` ADD ...` of the HEAD's write counters (the attribute names are keys.HEAD_COUNTERS)."""
    requests, messages, nbytes, throttles, conflicts = keys.HEAD_COUNTERS
    names.update({"#cr": requests, "#cm": messages, "#cb": nbytes})
    values.update({":cr": counts.requests, ":cm": counts.messages, ":cb": counts.bytes})
    clause = " ADD #cr :cr, #cm :cm, #cb :cb"
    if counts.throttles:
        names["#ct"], values[":ct"] = throttles, counts.throttles
        clause += ", #ct :ct"
    if counts.conflicts:
        names["#cc"], values[":cc"] = conflicts, counts.conflicts
        clause += ", #cc :cc"
    return clause
