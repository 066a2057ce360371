"""DynamoDB through the low-level client: plain Python values in and out, errors by code.

The low-level client keeps the broker's cold start small (no boto3 resource model) and lets the
engine see conditional failures as one exception carrying the item as it was.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, overload

from botocore.exceptions import ClientError

from sluice import errors
from sluice.adapters import aws
from sluice.constants import PARTITION_KEY, SORT_KEY

Item = dict[str, Any]

# Unprocessed keys of a batch call mean the table is throttling: retry them after a pause that doubles
# from UNPROCESSED_BASE_S up to UNPROCESSED_CAP_S, with full jitter so callers do not retry in step;
# after UNPROCESSED_ROUNDS calls the caller gets `Throttled` (its own retry comes later).
UNPROCESSED_BASE_S = 0.025
UNPROCESSED_CAP_S = 1.0
UNPROCESSED_ROUNDS = 8


class ConditionFailed(Exception):
    """A conditional write lost. `item` is the item as it was when the condition was checked."""

    def __init__(self, item: Item | None) -> None:
        super().__init__("conditional check failed")
        self.item = item


def _ser(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, int | float):
        return {"N": repr(value) if isinstance(value, float) else str(value)}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"B": bytes(value)}
    if value is None:
        return {"NULL": True}
    if isinstance(value, Mapping):
        return {"M": {str(k): _ser(v) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return {"L": [_ser(v) for v in value]}
    if isinstance(value, set | frozenset) and value and all(isinstance(v, str) for v in value):
        return {"SS": sorted(value)}  # a string set (never empty: DynamoDB refuses empty sets)
    raise TypeError(f"cannot store {type(value).__name__} in DynamoDB")


def _de(attr: Mapping[str, Any]) -> Any:
    ((kind, value),) = attr.items()
    if kind == "S":
        return value
    if kind == "N":
        return int(value) if value.lstrip("-").isdigit() else float(value)
    if kind == "B":
        return bytes(value)
    if kind == "BOOL":
        return value
    if kind == "NULL":
        return None
    if kind == "M":
        return {k: _de(v) for k, v in value.items()}
    if kind == "L":
        return [_de(v) for v in value]
    if kind == "SS":
        return set(value)
    if kind == "NS":
        return {int(v) for v in value}
    raise TypeError(f"unsupported DynamoDB type {kind}")


def serialize(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _ser(v) for k, v in item.items()}


@overload
def deserialize(raw: Mapping[str, Any]) -> Item: ...
@overload
def deserialize(raw: None) -> None: ...
def deserialize(raw: Mapping[str, Any] | None) -> Item | None:
    return None if raw is None else {k: _de(v) for k, v in raw.items()}


@contextmanager
def _conditional_errors() -> Iterator[None]:
    try:
        yield
    except ClientError as exc:
        if aws.error_code(exc) == "ConditionalCheckFailedException":
            raise ConditionFailed(deserialize(exc.response.get("Item"))) from exc
        raise


# A transaction cancelled for these reasons was throttled; for any other (a condition, another write in
# progress on an item) it lost to another writer.
_CANCELLED_THROTTLED = {"ThrottlingError", "ProvisionedThroughputExceeded"}


@dataclass(frozen=True)
class Update:
    """One item's part of `Table.update_together`."""

    pk: str
    sk: str
    expression: str
    condition: str | None = None
    names: Mapping[str, str] | None = None
    values: Mapping[str, Any] | None = None


def key(pk: str, sk: str) -> Item:
    return {PARTITION_KEY: pk, SORT_KEY: sk}


class Table:
    """One table with the shared `pk`/`sk` schema."""

    def __init__(self, name: str, endpoint_url: str | None = None, region: str | None = None) -> None:
        self.name = name
        self._endpoint_url = endpoint_url
        self.region = region  # None: the process's own region

    @property
    def _client(self) -> Any:
        return aws.client("dynamodb", self._endpoint_url, self.region)

    @property
    def _fail_fast_client(self) -> Any:
        return aws.client("dynamodb", self._endpoint_url, self.region, fail_fast=True)

    def pause(self, seconds: float) -> None:
        """The wait before unprocessed keys are sent again (the twin's tables wait in virtual time)."""
        time.sleep(seconds)

    def get(self, pk: str, sk: str, *, consistent: bool = True) -> Item | None:
        with aws.translated("DynamoDB"):
            resp = self._client.get_item(
                TableName=self.name, Key=serialize(key(pk, sk)), ConsistentRead=consistent
            )
        return deserialize(resp.get("Item"))

    def put(
        self,
        item: Mapping[str, Any],
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        kwargs = self._conditional(condition, names, values)
        with aws.translated("DynamoDB"), _conditional_errors():
            self._client.put_item(TableName=self.name, Item=serialize(item), **kwargs)

    def update(
        self,
        pk: str,
        sk: str,
        expression: str,
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
        returns: str = "NONE",
        fail_fast: bool = False,
    ) -> Item | None:
        """`fail_fast`: no retry on a throttle (`aws.FAIL_FAST_CONFIG`), for a caller that has somewhere
        else to go (a send that can move to another shard)."""
        kwargs = self._conditional(condition, names, values)
        client = self._fail_fast_client if fail_fast else self._client
        with aws.translated("DynamoDB"), _conditional_errors():
            resp = client.update_item(
                TableName=self.name,
                Key=serialize(key(pk, sk)),
                UpdateExpression=expression,
                ReturnValues=returns,
                **kwargs,
            )
        return deserialize(resp.get("Attributes"))

    def update_together(self, updates: Sequence[Update]) -> None:
        """Several conditional updates of this table, all or none (one TransactWriteItems: two write
        units an item). Raises `ConditionFailed` (no item) when a condition failed or another write to
        one of the items was in progress: the caller decides again from fresh reads."""
        items = []
        for update in updates:
            request = {
                "TableName": self.name,
                "Key": serialize(key(update.pk, update.sk)),
                "UpdateExpression": update.expression,
                **self._conditional(update.condition, update.names, update.values),
            }
            request.pop("ReturnValuesOnConditionCheckFailure", None)
            items.append({"Update": request})
        with aws.translated("DynamoDB"):
            try:
                self._client.transact_write_items(TransactItems=items)
            except ClientError as exc:
                if aws.error_code(exc) != "TransactionCanceledException":
                    raise
                reasons = {r.get("Code") for r in exc.response.get("CancellationReasons", [])}
                if reasons & _CANCELLED_THROTTLED:
                    raise errors.Throttled("DynamoDB is throttled; retry after a short pause") from exc
                raise ConditionFailed(None) from exc

    def delete(
        self,
        pk: str,
        sk: str,
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        kwargs = self._conditional(condition, names, values)
        with aws.translated("DynamoDB"), _conditional_errors():
            self._client.delete_item(TableName=self.name, Key=serialize(key(pk, sk)), **kwargs)

    def query(
        self,
        pk: str,
        *,
        sk_from: str | None = None,
        sk_to: str | None = None,
        sk_prefix: str | None = None,
        limit: int | None = None,
        forward: bool = True,
        consistent: bool = False,
    ) -> Iterator[Item]:
        """Items of one partition in sort-key order, following pages until `limit` items were read."""
        names = {"#pk": PARTITION_KEY, "#sk": SORT_KEY}
        values: dict[str, Any] = {":pk": pk}
        cond = "#pk = :pk"
        if sk_prefix is not None:
            cond += " AND begins_with(#sk, :pre)"
            values[":pre"] = sk_prefix
        elif sk_from is not None and sk_to is not None:
            cond += " AND #sk BETWEEN :lo AND :hi"
            values.update({":lo": sk_from, ":hi": sk_to})
        elif sk_from is not None:
            cond += " AND #sk >= :lo"
            values[":lo"] = sk_from
        elif sk_to is not None:
            cond += " AND #sk <= :hi"
            values[":hi"] = sk_to
        if "#sk" not in cond:
            del names["#sk"]
        kwargs: dict[str, Any] = {
            "TableName": self.name,
            "KeyConditionExpression": cond,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": serialize(values),
            "ScanIndexForward": forward,
            "ConsistentRead": consistent,
        }
        remaining = limit
        while True:
            if remaining is not None:
                kwargs["Limit"] = remaining
            with aws.translated("DynamoDB"):
                resp = self._client.query(**kwargs)
            for raw in resp.get("Items", []):
                yield deserialize(raw)
            if remaining is not None:
                remaining -= len(resp.get("Items", []))
                if remaining <= 0:
                    return
            if "LastEvaluatedKey" not in resp:
                return
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    @staticmethod
    def _conditional(
        condition: str | None, names: Mapping[str, str] | None, values: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if condition:
            kwargs["ConditionExpression"] = condition
            kwargs["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        if names:
            kwargs["ExpressionAttributeNames"] = dict(names)
        if values:
            kwargs["ExpressionAttributeValues"] = serialize(values)
        return kwargs


def batch_get_across(
    requests: Mapping[Table, Iterable[tuple[str, str]]], *, consistent: bool = True, fail_fast: bool = False
) -> dict[tuple[str, str, str], Item]:
    """One BatchGetItem over several tables (≤ 100 keys): {(table, pk, sk): item} for items that exist.
    Keys still throttled after the retries end in `Throttled`; `fail_fast`: after one call, not
    retried (for a caller that has an answer without them)."""
    found, unread = batch_get_available(requests, consistent=consistent, fail_fast=fail_fast)
    if unread:
        raise errors.Throttled("DynamoDB left part of a batch unprocessed on every retry; retry shortly")
    return found


def batch_get_available(
    requests: Mapping[Table, Iterable[tuple[str, str]]], *, consistent: bool = True, fail_fast: bool = False
) -> tuple[dict[tuple[str, str, str], Item], set[tuple[str, str, str]]]:
    """`batch_get_across` for a reader that can act on part of the keys (the coordinator): what could be
    read, and the (table, pk, sk) keys still throttled after the retries instead of an error. A call
    throttled on every key has already been retried by the SDK, so its keys are unread at once.
    Tables of several regions (same names in each) are read with one call per region."""
    by_region: dict[str | None, list[Table]] = {}
    for table in requests:
        by_region.setdefault(table.region, []).append(table)
    found: dict[tuple[str, str, str], Item] = {}
    unread: set[tuple[str, str, str]] = set()
    for tables in by_region.values():
        part, missed = _batch_get_one_region(tables, requests, consistent, fail_fast)
        found |= part
        unread |= missed
    return found, unread


def _batch_get_one_region(
    tables: Sequence[Table],
    requests: Mapping[Table, Iterable[tuple[str, str]]],
    consistent: bool,
    fail_fast: bool,
) -> tuple[dict[tuple[str, str, str], Item], set[tuple[str, str, str]]]:
    pending: dict[str, Any] = {}
    for t in tables:
        entry = pending.setdefault(t.name, {"Keys": [], "ConsistentRead": consistent})
        entry["Keys"] += [serialize(key(pk, sk)) for pk, sk in requests[t]]
    client = tables[0]._fail_fast_client if fail_fast else tables[0]._client
    rounds = 1 if fail_fast else UNPROCESSED_ROUNDS
    found: dict[tuple[str, str, str], Item] = {}
    left: dict[str, Any] = {}
    try:
        for resp in _until_processed(
            client.batch_get_item, pending, "UnprocessedKeys", tables[0].pause, left, rounds
        ):
            for table_name, raws in resp["Responses"].items():
                for raw in raws:
                    item = deserialize(raw)
                    found[(table_name, item[PARTITION_KEY], item[SORT_KEY])] = item
    except errors.Throttled:
        pass  # `left` holds the request no call processed
    unread = {
        (table_name, k[PARTITION_KEY], k[SORT_KEY])
        for table_name, request in left.items()
        for k in map(deserialize, request["Keys"])
    }
    return found, unread


def batch_delete(table: Table, keys: Sequence[tuple[str, str]]) -> None:
    """Delete items by key, 25 per BatchWriteItem, retrying unprocessed ones (TTL sweeps, cleanup)."""
    for start in range(0, len(keys), 25):
        requests = [{"DeleteRequest": {"Key": serialize(key(pk, sk))}} for pk, sk in keys[start : start + 25]]
        write = table._client.batch_write_item
        for _ in _until_processed(write, {table.name: requests}, "UnprocessedItems", table.pause):
            pass


def unprocessed_pause(round_: int, rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait before retry `round_` (1, 2, ...) of unprocessed keys: full jitter, capped."""
    return rand() * min(UNPROCESSED_CAP_S, UNPROCESSED_BASE_S * 2 ** (round_ - 1))


def _until_processed(
    call: Callable[..., dict[str, Any]],
    request: dict[str, Any],
    unprocessed: str,
    pause: Callable[[float], None],
    left: dict[str, Any] | None = None,
    rounds: int = UNPROCESSED_ROUNDS,
) -> Iterator[dict[str, Any]]:
    """Each response of a batch call, re-sending what came back unprocessed after a backoff pause. On
    `Throttled`, `left` (when given) holds the part of the request that was never processed."""
    for round_ in range(rounds):
        if round_:
            pause(unprocessed_pause(round_))
        if left is not None:
            left.clear()
            left.update(request)
        with aws.translated("DynamoDB"):
            resp = call(RequestItems=request)
        yield resp
        request = resp.get(unprocessed) or {}
        if not request:
            if left is not None:
                left.clear()
            return
    if left is not None:
        left.clear()
        left.update(request)
    raise errors.Throttled("DynamoDB left part of a batch unprocessed on every retry; retry shortly")
