"""The shard store on DynamoDB: the shard tables' items, keys and expressions (schema in engine/keys.py).

Every read of a batch item is decoded here, once per process (items never change; a bounded cache of
decoded batches saves the consumer re-decoding an item it leases from in parts).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from sluice import codec, errors
from sluice.adapters.dynamo import (
    ConditionFailed,
    Table,
    Update,
    batch_delete,
    batch_get_across,
    batch_get_available,
)
from sluice.codec import StoredMessage
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.engine.groupstate import GroupState
from sluice.engine.lanes import MAX_LANES, Cursor, GroupLanes, LaneState
from sluice.engine.payloads import ItemMessages
from sluice.engine.store.items import (
    Allocation,
    AllocationRefused,
    BatchItem,
    ClaimRefused,
    Head,
    HeadCounts,
    HeadGuard,
    InlinePayload,
    LaneAddress,
    LaneRead,
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
    """A lane's state decoded; absent (or only acks recorded on it): a lane that never read this shard."""
    if item is None or keys.STATE_BLOB not in item:
        return GroupState()
    return GroupState.decode(bytes(item[keys.STATE_BLOB]), int(item[keys.STATE_VERSION]))


def lane_of(lane: int, item: Item | None) -> LaneState:
    item = item or {}
    acked = item.get(keys.STATE_ACKED)
    return LaneState(
        lane,
        state_of(item or None),
        frozenset(acked or ()),
        int(item.get(keys.STATE_AT, 0)),
        int(item.get(keys.STATE_ACKS_ADDED, 0)),
        int(item.get(keys.STATE_RETIRED, 0)),
    )


def cursor_of(item: Item | None) -> Cursor | None:
    """Lane 0's cursor, None while the group reads the shard in one lane."""
    if item is None or keys.CURSOR_NEXT not in item:
        return None
    ranges = {}
    for attr, value in item.items():
        if attr.startswith(keys.RANGE_LO) and attr[len(keys.RANGE_LO) :].isdigit():
            lane = int(attr[len(keys.RANGE_LO) :])
            ranges[lane] = (int(value), int(item.get(f"{keys.RANGE_HI}{lane}") or value))
    return Cursor(
        next=int(item[keys.CURSOR_NEXT]),
        lanes=int(item.get(keys.CURSOR_LANES, 1)),
        high=int(item.get(keys.CURSOR_HIGH, 1)),
        ranges=ranges,
        ceiling=int(item.get(keys.CURSOR_CEILING, MAX_LANES)),
        stripe=int(item.get(keys.CURSOR_STRIPE, 0)),
        epoch=int(item.get(keys.CURSOR_EPOCH, 0)),
    )


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

    # --- consumer groups, in lanes -----------------------------------------------------------------------

    def _lane_key(self, at: ShardAddress, group: str, lane: int) -> tuple[str, str]:
        return keys.lane_partition(at.pk, lane), keys.group_state_sk(group)

    def read_groups(
        self,
        ats: Sequence[ShardAddress],
        groups: Sequence[str],
        *,
        partial: bool = False,
        every_lane: bool = True,
        fail_fast: bool = False,
    ) -> tuple[list[ShardView], list[ShardAddress]]:
        wanted = {
            at.pk: (at, [(at.pk, keys.HEAD_SK), *(self._lane_key(at, g, 0) for g in groups)]) for at in ats
        }
        found, unread = self._read_keys(wanted, partial, fail_fast=fail_fast)
        views = []
        for at in ats:
            if at.pk in unread:
                continue
            items = found[at.pk]
            view = ShardView(at, head_of(items.get((at.pk, keys.HEAD_SK))))
            for g in groups:
                zero = items.get(self._lane_key(at, g, 0))
                view.groups[g] = GroupLanes(cursor_of(zero), {0: lane_of(0, zero)})
            views.append(view)
        if not every_lane:
            return views, [at for at in ats if at.pk in unread]
        views, unread_more = self._add_lanes(views, partial, fail_fast)
        unread |= {at.pk for at in unread_more}
        return views, [at for at in ats if at.pk in unread]

    def read_other_lanes(
        self,
        views: Sequence[ShardView],
        *,
        fail_fast: bool = False,
        skip: Container[tuple[str, str, int]] = frozenset(),
    ) -> tuple[list[ShardView], list[ShardAddress]]:
        fresh = [
            ShardView(
                v.address, v.head, {g: GroupLanes(gl.cursor, {0: gl.lane0}) for g, gl in v.groups.items()}
            )
            for v in views
        ]
        return self._add_lanes(fresh, True, fail_fast, skip)

    def _add_lanes(
        self,
        views: list[ShardView],
        partial: bool,
        fail_fast: bool,
        skip: Container[tuple[str, str, int]] = frozenset(),
    ) -> tuple[list[ShardView], list[ShardAddress]]:
        """Lanes 1 .. high - 1 of each split group into `views` (which hold lane 0 and its cursor), but
        those in `skip` ((shard pk, group, lane): left out of the views): the views with them, and the
        shards whose lanes stayed throttled (dropped from the views)."""
        wanted: dict[tuple[str, str], list[int]] = {}  # (shard pk, group) -> the lanes to read
        more: dict[str, tuple[ShardAddress, list[tuple[str, str]]]] = {}
        for view in views:
            at = view.address
            for g, group in view.groups.items():
                if group.cursor is None or group.cursor.high <= 1:
                    continue
                lanes = [lane for lane in range(1, group.cursor.high) if (at.pk, g, lane) not in skip]
                wanted[(at.pk, g)] = lanes
                if lanes:
                    more.setdefault(at.pk, (at, []))[1].extend(self._lane_key(at, g, lane) for lane in lanes)
        if not more:
            return views, []
        found, unread = self._read_keys(more, partial, fail_fast=fail_fast)
        for view in views:
            at = view.address
            for g, group in view.groups.items():
                if group.cursor is None or at.pk in unread:
                    continue
                for lane in wanted.get((at.pk, g), []):
                    group.lanes[lane] = lane_of(lane, found.get(at.pk, {}).get(self._lane_key(at, g, lane)))
        return [v for v in views if v.address.pk not in unread], [
            v.address for v in views if v.address.pk in unread
        ]

    def glance(
        self, ats: Sequence[ShardAddress], lanes: Sequence[LaneAddress]
    ) -> tuple[list[Head], list[int]]:
        wanted: dict[str, tuple[ShardAddress, list[tuple[str, str]]]] = {}
        for at in ats:
            wanted.setdefault(at.pk, (at, []))[1].append((at.pk, keys.HEAD_SK))
        for ref in lanes:
            wanted.setdefault(ref.at.pk, (ref.at, []))[1].append(self._lane_key(ref.at, ref.group, ref.lane))
        found, _ = self._read_keys(wanted, partial=False, consistent=False)
        heads = [head_of(found[at.pk].get((at.pk, keys.HEAD_SK))) for at in ats]
        versions = [
            int(found[r.at.pk].get(self._lane_key(r.at, r.group, r.lane), {}).get(keys.STATE_VERSION, 0))
            for r in lanes
        ]
        return heads, versions

    def _read_keys(
        self,
        wanted: dict[str, tuple[ShardAddress, list[tuple[str, str]]]],
        partial: bool,
        *,
        consistent: bool = True,
        fail_fast: bool = False,
    ) -> tuple[dict[str, dict[tuple[str, str], Item]], set[str]]:
        """BatchGetItems (≤ 100 keys each; consistent unless told), by shard partition: its items by
        key, and the shards with a key still throttled after the retries (only with `partial`)."""
        found: dict[str, dict[tuple[str, str], Item]] = {pk: {} for pk in wanted}
        unread: set[str] = set()
        flat = [(pk, self._table(at), key) for pk, (at, key_list) in wanted.items() for key in key_list]
        for lo in range(0, len(flat), MAX_BATCH_KEYS):
            requests: dict[Table, list[tuple[str, str]]] = {}
            owner: dict[tuple[str, str, str], str] = {}
            for pk, table, key in flat[lo : lo + MAX_BATCH_KEYS]:
                requests.setdefault(table, []).append(key)
                owner[(table.name, *key)] = pk
            if partial:
                items, missed = batch_get_available(requests, consistent=consistent, fail_fast=fail_fast)
            else:
                items, missed = batch_get_across(requests, consistent=consistent, fail_fast=fail_fast), set()
            unread.update(owner[k] for k in missed)
            for k, item in items.items():
                found[owner[k]][(k[1], k[2])] = item
        return found, unread

    def read_lanes(
        self,
        at: ShardAddress,
        group: str,
        lanes: Sequence[int],
        *,
        head: bool,
        cursor: bool = True,
        fail_fast: bool = False,
        consistent: bool = True,
    ) -> LaneRead:
        wanted = sorted({0, *lanes} if cursor else set(lanes))
        key_list = [self._lane_key(at, group, lane) for lane in wanted]
        if head:
            key_list.append((at.pk, keys.HEAD_SK))
        found, _ = self._read_keys(
            {at.pk: (at, key_list)}, partial=False, consistent=consistent, fail_fast=fail_fast
        )
        items = found[at.pk]
        zero = items.get(self._lane_key(at, group, 0))
        return LaneRead(
            head_of(items.get((at.pk, keys.HEAD_SK))) if head else None,
            cursor_of(zero) if cursor else None,
            {lane: lane_of(lane, items.get(self._lane_key(at, group, lane))) for lane in wanted},
        )

    def commit_lane(
        self,
        at: ShardAddress,
        group: str,
        lane: int,
        state: GroupState,
        old_version: int,
        *,
        now_ms: int,
        folded: frozenset[str] = frozenset(),
        acks_added: int | None = None,
    ) -> None:
        names = {"#s": keys.STATE_BLOB, "#v": keys.STATE_VERSION, "#at": keys.STATE_AT}
        values: dict[str, Any] = {":s": state.encode(), ":v1": old_version + 1, ":at": now_ms}
        expression = "SET #s = :s, #v = :v1, #at = :at"
        if old_version == 0:
            condition = "attribute_not_exists(#v)"
        else:
            condition, values[":v"] = "#v = :v", old_version
        if acks_added is not None:  # a redelivery: only if no ack was recorded since the lane was read
            names["#an"] = keys.STATE_ACKS_ADDED
            if acks_added:
                condition, values[":an"] = f"{condition} AND #an = :an", acks_added
            else:
                condition += " AND attribute_not_exists(#an)"
        if lane == 0:
            names["#rd"], values[":rd"] = keys.STATE_READ, state.read
            expression += ", #rd = :rd"
        if folded:
            names["#ak"] = keys.STATE_ACKED
            values[":ak"] = set(folded)
            expression += " DELETE #ak :ak"
        pk, sk = self._lane_key(at, group, lane)
        try:
            self._table(at).update(pk, sk, expression, condition=condition, names=names, values=values)
        except ConditionFailed as exc:
            raise StateConflict(lane_of(lane, exc.item), cursor_of(exc.item) if lane == 0 else None) from exc

    def claim(
        self, at: ShardAddress, group: str, lane: int, count: int, *, limit: int, seen_hi: int | None
    ) -> tuple[int, int]:
        names = {
            "#c": keys.CURSOR_NEXT,
            "#n": keys.CURSOR_LANES,
            "#lo": f"{keys.RANGE_LO}{lane}",
            "#hi": f"{keys.RANGE_HI}{lane}",
        }
        values: dict[str, Any] = {":k": count, ":limit": limit, ":lane": lane}
        # Every operand reads the item as it was before the update: lo and hi get the old cursor.
        condition = "#c <= :limit AND #n > :lane AND "
        if seen_hi is None:
            condition += "attribute_not_exists(#hi)"
        else:
            condition += "#hi = :seen"
            values[":seen"] = seen_hi
        pk, sk = self._lane_key(at, group, 0)
        try:
            new = self._table(at).update(
                pk,
                sk,
                "SET #lo = #c, #hi = #c + :k, #c = #c + :k",
                condition=condition,
                names=names,
                values=values,
                returns="UPDATED_NEW",
            )
        except ConditionFailed as exc:
            raise ClaimRefused(cursor_of(exc.item)) from exc
        # The claim is [old cursor, old cursor + count): read back from the cursor, which always moves
        # (UPDATED_NEW may leave out an attribute whose value a SET did not change).
        end = int((new or {})[keys.CURSOR_NEXT])
        return end - count, end

    def record_acks(self, at: ShardAddress, group: str, lane: int, records: frozenset[str]) -> None:
        pk, sk = self._lane_key(at, group, lane)
        self._table(at).update(
            pk,
            sk,
            "ADD #ak :ak, #an :one",
            names={"#ak": keys.STATE_ACKED, "#an": keys.STATE_ACKS_ADDED},
            values={":ak": set(records), ":one": 1},
        )

    def split(self, at: ShardAddress, group: str, lanes: int, stripe: int = 0) -> bool:
        names = {
            "#c": keys.CURSOR_NEXT,
            "#n": keys.CURSOR_LANES,
            "#h": keys.CURSOR_HIGH,
            "#lo": f"{keys.RANGE_LO}0",
            "#hi": f"{keys.RANGE_HI}0",
            "#rd": keys.STATE_READ,
            "#v": keys.STATE_VERSION,
        }
        # The cursor starts at lane 0's read level as stored at this moment (every operand reads the item
        # before the update), whatever its puller did meanwhile; and lane 0's version moves on, so a
        # puller that read it before the split cannot commit over it. Never fails for contention.
        expression, values = "SET #lo = #rd, #hi = #rd, #c = #rd, #n = :l, #h = :l", {":l": lanes, ":one": 1}
        added = "#v :one"
        if stripe:  # a new epoch of stripes
            names["#sb"], values[":sb"] = keys.CURSOR_STRIPE, stripe
            names["#ep"] = keys.CURSOR_EPOCH
            expression += ", #sb = :sb"
            added += ", #ep :one"
        pk, sk = self._lane_key(at, group, 0)
        try:
            self._table(at).update(
                pk,
                sk,
                f"{expression} ADD {added}",
                condition="attribute_not_exists(#c) AND attribute_exists(#rd)",
                names=names,
                values=values,
            )
        except ConditionFailed:
            return False
        return True

    def set_lanes(self, at: ShardAddress, group: str, lanes: int, high: int, seen: Cursor) -> bool:
        pk, sk = self._lane_key(at, group, 0)
        try:
            self._table(at).update(
                pk,
                sk,
                "SET #n = :l, #h = :h",
                condition="#n = :seen_l AND #h = :seen_h",
                names={"#n": keys.CURSOR_LANES, "#h": keys.CURSOR_HIGH},
                values={":l": lanes, ":h": high, ":seen_l": seen.lanes, ":seen_h": seen.high},
            )
        except ConditionFailed:
            return False
        return True

    def set_ceiling(self, at: ShardAddress, group: str, ceiling: int, seen: Cursor) -> bool:
        names = {"#c": keys.CURSOR_NEXT, "#lc": keys.CURSOR_CEILING}
        values: dict[str, Any] = {":lc": ceiling}
        condition = "attribute_exists(#c) AND "
        if seen.ceiling == MAX_LANES:
            condition += "(attribute_not_exists(#lc) OR #lc = :seen)"
        else:
            condition += "#lc = :seen"
        values[":seen"] = seen.ceiling
        pk, sk = self._lane_key(at, group, 0)
        try:
            self._table(at).update(pk, sk, "SET #lc = :lc", condition=condition, names=names, values=values)
        except ConditionFailed:
            return False
        return True

    def merge(
        self,
        at: ShardAddress,
        group: str,
        lane0: GroupState,
        old_version: int,
        seen: Cursor,
        stripes: Mapping[int, GroupState] | None = None,
    ) -> bool:
        names = {
            "#s": keys.STATE_BLOB,
            "#v": keys.STATE_VERSION,
            "#c": keys.CURSOR_NEXT,
            "#n": keys.CURSOR_LANES,
            "#h": keys.CURSOR_HIGH,
            "#lc": keys.CURSOR_CEILING,
            "#sb": keys.CURSOR_STRIPE,
            "#rd": keys.STATE_READ,
        }
        removed = ["#c", "#n", "#h", "#lc", "#sb"]
        for lane in seen.ranges:
            names[f"#lo{lane}"], names[f"#hi{lane}"] = f"{keys.RANGE_LO}{lane}", f"{keys.RANGE_HI}{lane}"
            removed += [f"#lo{lane}", f"#hi{lane}"]
        values: dict[str, Any] = {
            ":s": lane0.encode(),
            ":v1": old_version + 1,
            ":c": seen.next,
            ":rd": lane0.read,
        }
        if old_version == 0:
            condition = "attribute_not_exists(#v)"
        else:
            condition, values[":v"] = "#v = :v", old_version
        condition += " AND #c = :c"  # every claim moves the cursor: no lane gained work since `seen`
        pk, sk = self._lane_key(at, group, 0)
        expression = f"SET #s = :s, #v = :v1, #rd = :rd REMOVE {', '.join(removed)}"
        try:
            if not seen.stripe:
                self._table(at).update(pk, sk, expression, condition=condition, names=names, values=values)
                return True
            # Stripes claim nothing, so the cursor does not say they gained no work: each stripe lane is
            # written too, on the version the merge saw (a puller's lease there since fails the whole),
            # and retired for the epoch (a puller that read the cursor before the merge and its lane
            # after it reads nothing new there; one that read the lane before fails its commit).
            updates = [Update(pk, sk, expression, condition, names, values)]
            for lane, state in sorted((stripes or {}).items()):
                updates.append(self._retirement(at, group, lane, state, seen.epoch))
            self._table(at).update_together(updates)
        except ConditionFailed:
            return False
        return True

    def _retirement(self, at: ShardAddress, group: str, lane: int, state: GroupState, epoch: int) -> Update:
        names = {"#s": keys.STATE_BLOB, "#v": keys.STATE_VERSION, "#rt": keys.STATE_RETIRED}
        values: dict[str, Any] = {":s": state.encode(), ":v1": state.version + 1, ":rt": epoch}
        if state.version == 0:
            condition = "attribute_not_exists(#v)"
        else:
            condition, values[":v"] = "#v = :v", state.version
        pk, sk = self._lane_key(at, group, lane)
        return Update(pk, sk, "SET #s = :s, #v = :v1, #rt = :rt", condition, names, values)

    def put_state(self, at: ShardAddress, group: str, state: GroupState) -> None:
        pk, sk = self._lane_key(at, group, 0)
        self._table(at).put(
            {
                keys.PK: pk,
                keys.SK: sk,
                keys.STATE_VERSION: max(1, state.version),
                keys.STATE_BLOB: state.encode(),
            }
        )

    def delete_group(self, at: ShardAddress, group: str) -> None:
        zero = self._table(at).get(*self._lane_key(at, group, 0))
        cursor = cursor_of(zero)
        high = (
            1 if cursor is None else max([cursor.high, cursor.lanes, *(lane + 1 for lane in cursor.ranges)])
        )
        for lane in range(high):
            self._table(at).delete(*self._lane_key(at, group, lane))


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
