"""An in-memory DynamoDB low-level client in virtual time: what `sluice.adapters.dynamo.Table` calls.

Model, per call (each documented where it comes from):
- Capacity units from the real item sizes (`bench.units.item_size`, DynamoDB's size rules): writes
  ceil(max(old, new) / 1 KB) per item (a failed condition still costs the existing item's units, at
  least 1); GetItem/BatchGetItem ceil(size / 4 KB) per item (at least 1), Query ceil(sum / 4 KB);
  eventually consistent reads half.
- Per partition key, 1,000 WCU/s and 3,000 RCU/s *combined* ("3,000 RCU or 1,000 WCU per second, or a
  combination of both", AWS re:Post knowledge center, dynamodb-spiky-workloads-short-intervals). A
  token bucket holding one second of capacity, refilled continuously; a request is admitted while the
  bucket is above zero and charged in full (large items are not starved by small ones). Table-level
  burst capacity ("up to 300 seconds of unused capacity") does not apply, as the same page says:
  "burst capacity can't alleviate partition-level throttling". Adaptive capacity's split-for-heat is
  not modelled (a shard's items share one partition key, which split-for-heat can divide by sort key
  only over minutes): the twin is conservative there.
- Per table, 40,000 read request units and 40,000 write request units a second: an on-demand table's
  default quota ("By default ... your on-demand throughput rate is bounded by 40,000 table-level read
  and write throughput AWS service quota", developer guide, "DynamoDB maximum throughput for on-demand
  tables"; adjustable on request: `table_units_per_s`). Read and write are separate token buckets of
  one second, refilled continuously and charged as the partitions' are; a request past either is
  throttled as `RequestLimitExceeded` with the throttling reason `TableWriteAccountLimitExceeded`
  (`...Read...`) where a partition's answers `ProvisionedThroughputExceededException` with
  `TableWriteKeyRangeThroughputExceeded` ("ThrottlingReason", API reference).
- A throttled request consumes nothing and answers its throttling error as a botocore `ClientError`;
  BatchGetItem returns throttled keys as UnprocessedKeys and raises only when no key could be read
  (DynamoDB's documented BatchGetItem behaviour).
- The SDK's retries are modelled as botocore's standard mode does them for the engine's config
  (6 attempts in all): a throttled attempt is retried after rand(0,1) x 2^(attempt-1) s
  (botocore/retries/standard.py, `ExponentialBackoff`, throttling base scale 1). Adaptive mode's
  client-side rate limiter is not modelled.
- A table in another region than the calling actor adds one inter-region round trip per attempt
  (`bench.twin.network`); without a region (the single-region scenarios) nothing is added.
- Documented request limits are enforced as DynamoDB enforces them ("Quotas in Amazon DynamoDB",
  developer guide, "Item size", "API-specific limits"; `Query` and `BatchGetItem` API references): an
  item of more than 400 KB is refused (ValidationException, nothing written); BatchGetItem takes at most
  100 keys (ValidationException) and answers at most 16 MB, the keys past it unprocessed; BatchWriteItem
  takes at most 25 requests; TransactWriteItems at most 100 items, of 4 MB in all as written
  (`TransactWriteItems` API reference; moto takes more); a Query page holds the items that fit in 1 MB
  ("A single Query only returns a result set that fits within the 1 MB size limit"), with a
  LastEvaluatedKey to go on from, and each page is charged on its own.
- Eventually consistent reads may be stale ("Read consistency", developer guide: such a read "might
  not reflect the results of a recently completed write"; "consistency across all copies of data is
  usually reached within a second"). DynamoDB keeps three copies of an item and acknowledges a write
  once two hold it; so a GetItem or BatchGetItem key read eventually consistently is answered, once in
  three (`STALE_SHARE`), by the copy the write did not wait for, as it stood at a moment drawn
  uniformly in the last `stale_max_s`. Off by default (0): AWS documents the bound (`STALE_MAX_S`,
  "within a second"), not how far behind a copy usually is, and at the bound a third of the
  eventually consistent glances would answer from up to a second back, which the latency figures
  would then carry; correctness checks turn it on (`build(stale_reads=True)`). Queries answer the
  current state whatever their consistency (the engine's hot-path Queries are consistent).
- Latency per attempt: log-normal, median 4 ms, sigma 0.45 (p99 ≈ 11 ms) plus 0.01 ms per KB moved.
  AWS: "for most atomic operations, such as GetItem and PutItem, an average latency is in
  single-digit milliseconds" (re:Post, dynamodb-high-latency); client-side figures of 10-20 ms are
  quoted by Dynobase ("DynamoDB Performance & Latency") for typical, not in-VPC-endpoint, setups.
"""

from __future__ import annotations

import bisect
import copy
import math
import random
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import ClientError

from bench.twin import expr
from bench.twin.network import Network
from bench.twin.sim import Sim
from bench.units import item_size
from sluice.adapters import aws

WCU_PER_S = 1000.0
RCU_PER_S = 3000.0
MAX_ATTEMPTS = aws.RETRY_CONFIG.retries["total_max_attempts"]
STALE_SHARE = 1 / 3  # eventually consistent reads answered by the copy a write did not wait for
STALE_MAX_S = 1.0  # how far behind that copy may be ("usually ... within a second"): `stale_max_s` when on
TABLE_UNITS_PER_S = 40_000.0  # an on-demand table's default quota, read and write each
THROTTLE = "ProvisionedThroughputExceededException"  # a partition's (key range's) capacity
TABLE_QUOTA_THROTTLE = "RequestLimitExceeded"  # the table's account-level quota
_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"}
MAX_TRANSACT_ITEMS = 100
MAX_TRANSACT_BYTES = 4 * 1024 * 1024  # "The aggregate size of the items ... cannot exceed 4 MB"
MAX_ITEM_BYTES = 400 * 1024  # "The maximum item size in DynamoDB is 400 KB"
MAX_BATCH_GET_KEYS = 100
MAX_BATCH_GET_BYTES = 16 * 1024 * 1024
MAX_BATCH_WRITE_REQUESTS = 25
MAX_PAGE_BYTES = 1024 * 1024  # a Query reads at most 1 MB per call
VALIDATION = "ValidationException"
_TOO_MANY = "Too many items requested for the {} call"


@dataclass
class Latency:
    median_s: float = 0.004
    sigma: float = 0.45
    per_kb_s: float = 0.00001
    rng: random.Random = field(default_factory=lambda: random.Random(14))

    def sample(self, kb: float = 0.0) -> float:
        return self.median_s * math.exp(self.rng.gauss(0.0, self.sigma)) + kb * self.per_kb_s

    def fresh(self) -> Latency:
        """This model with a stream of its own, starting where this one stands: a module-level model (S3,
        SSM) is shared by every World of the process, so a client that drew on it directly saw the draws
        earlier Worlds left (a run's figures then depended on what ran before it)."""
        return replace(self, rng=copy.deepcopy(self.rng))


@dataclass
class _Partition:
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    sks: list[str] = field(default_factory=list)  # sorted
    tokens: float = 1.0  # share of one second of the partition's capacity
    at: float = 0.0
    # sk -> (virtual time of a write, the item before it), oldest first, for the last `stale_max_s`: what
    # a lagging copy still answers (items are never changed in place: a write stores a new dict).
    history: dict[str, deque[tuple[float, dict[str, Any] | None]]] = field(default_factory=dict)
    writes: deque[tuple[float, str]] = field(default_factory=deque)  # (time, sk) of each write kept there

    def remember(self, sk: str, now: float, window_s: float) -> None:
        """Keep the item as it is before a write at `now`; forget writes older than the window."""
        self.history.setdefault(sk, deque()).append((now, self.items.get(sk)))
        self.writes.append((now, sk))
        while self.writes[0][0] < now - window_s:
            _, old_sk = self.writes.popleft()
            kept = self.history[old_sk]
            kept.popleft()
            if not kept:
                del self.history[old_sk]

    def as_of(self, sk: str, moment: float) -> dict[str, Any] | None:
        """The item as a copy that has applied the writes up to `moment` holds it."""
        for when, before in self.history.get(sk, ()):
            if when > moment:
                return before
        return self.items.get(sk)


@dataclass
class _TableQuota:
    """A table's read and write request units for the next second (shares of the quota)."""

    read: float = 1.0
    write: float = 1.0
    at: float = 0.0


@dataclass(frozen=True)
class _Refusal:
    """Why an attempt was throttled: the partition's capacity or the table's quota."""

    code: str
    limit: str  # the throttling reason's limit type

    def error(self, operation: str, table: str, writes: bool) -> ClientError:
        error = _error(self.code, operation)
        reason = f"Table{'Write' if writes else 'Read'}{self.limit}"
        resource = f"arn:aws:dynamodb:us-east-1:000000000000:table/{table}"
        error.response["ThrottlingReasons"] = [{"reason": reason, "resource": resource}]
        return error


KEY_RANGE = _Refusal(THROTTLE, "KeyRangeThroughputExceeded")
TABLE_QUOTA = _Refusal(TABLE_QUOTA_THROTTLE, "AccountLimitExceeded")


@dataclass
class Stats:
    """What the twin saw, for the scenarios: attempts, throttles and conditional failures by operation
    and by the sort-key kind of the item (HEAD, G# state, M# batch, other)."""

    attempts: Counter = field(default_factory=Counter)
    throttles: Counter = field(default_factory=Counter)
    conditional_failures: Counter = field(default_factory=Counter)
    wcu: float = 0.0
    rcu: float = 0.0
    # Units by the role of the actor that spent them (its name up to the first "-": "puller",
    # "producer"): a scenario with producers and pullers at once prices each side on its own.
    wcu_by: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    rcu_by: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))

    def reset(self) -> None:
        self.attempts.clear()
        self.throttles.clear()
        self.conditional_failures.clear()
        self.wcu_by.clear()
        self.rcu_by.clear()
        self.wcu = self.rcu = 0.0


def _kind(sk: str) -> str:
    return "HEAD" if sk == "HEAD" else sk[:2] if sk[:2] in ("G#", "M#") else "other"


def _error(
    code: str, operation: str, item: dict[str, Any] | None = None, *, message: str | None = None
) -> ClientError:
    response: dict[str, Any] = {"Error": {"Code": code, "Message": message or code}}
    if item is not None:
        response["Item"] = item
    return ClientError(response, operation)


def _refuse_oversized(item: dict[str, Any] | None, operation: str) -> None:
    if item is not None and item_size(item) > MAX_ITEM_BYTES:
        raise _error(VALIDATION, operation, message="Item size has exceeded the maximum allowed size")


def write_units(old: dict[str, Any] | None, new: dict[str, Any] | None) -> int:
    size = max(item_size(old) if old else 0, item_size(new) if new else 0)
    return max(1, math.ceil(size / 1024))


def read_units(sizes: list[int], consistent: bool, per_item: bool) -> float:
    units = (
        sum(max(1, math.ceil(s / 4096)) for s in sizes) if per_item else max(1, math.ceil(sum(sizes) / 4096))
    )
    return units if consistent else units / 2


class TwinDynamo:
    """The subset of the botocore DynamoDB client the adapter calls, over in-memory tables."""

    def __init__(
        self,
        sim: Sim,
        latency: Latency | None = None,
        rng: random.Random | None = None,
        *,
        region: str | None = None,
        network: Network | None = None,
    ) -> None:
        self.sim = sim
        self.region = region  # where these tables are (None: the only region)
        self.network = network
        self.latency = latency or Latency()
        self.rng = rng or random.Random(7)
        self.tables: dict[str, dict[str, _Partition]] = {}
        self.stats = Stats()
        self.throttle_log: list[float] = []  # virtual times of throttled attempts (plots)
        self.write_timeline: defaultdict[int, list[int]] = defaultdict(lambda: [0, 0])  # s -> [ok, throttled]
        # Sampling: a scenario may run 1/k of the load against partitions of 1/k the capacity (same
        # shard count, same utilisation, k times fewer simulated requests); 1.0 is DynamoDB as is.
        self.capacity_scale = 1.0
        self.table_units_per_s = TABLE_UNITS_PER_S  # each table's read and write quota (a raised one: more)
        self.quotas: defaultdict[str, _TableQuota] = defaultdict(_TableQuota)
        # (table, virtual second) -> [read, write] units consumed: how near a table runs to its quota.
        self.table_units: defaultdict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
        self.refused: tuple[_Refusal, str, bool] = (KEY_RANGE, "", True)  # the last: why, table, a write
        self.max_attempts = MAX_ATTEMPTS  # the engine's botocore config; experiments may lower it
        self.stale_max_s = 0.0  # 0: eventually consistent reads see every write at once
        self.stale_rng = random.Random(self.rng.random())  # its own stream: staleness moves no other draw
        self.unlimited = False  # scenario set-up (seeding a backlog) is not measured

    def create_table(self, name: str) -> None:
        self.tables.setdefault(name, defaultdict(_Partition))

    def _latency(self, kb: float = 0.0) -> float:
        """One attempt as the calling actor sees it: DynamoDB's own latency, plus the round trip
        between the actor's region and this one."""
        own = self.latency.sample(kb)
        if self.network is None:
            return own
        return own + self.network.rtt(getattr(self.sim.current, "region", None), self.region)

    # -- capacity --

    def _refilled(self, table: str, pk: str) -> _Partition:
        part = self.tables[table][pk]
        now = self.sim.now
        part.tokens = min(1.0, part.tokens + (now - part.at))
        part.at = now
        return part

    def _quota(self, table: str) -> _TableQuota:
        quota = self.quotas[table]
        now = self.sim.now
        quota.read = min(1.0, quota.read + (now - quota.at))
        quota.write = min(1.0, quota.write + (now - quota.at))
        quota.at = now
        return quota

    def _refuses(self, table: str, pk: str, wcu: float, rcu: float) -> bool:
        """Whether the partition or the table has no capacity left for this request (recorded in
        `refused`); admitted while a bucket holds capacity, then charged in full (`_charge`)."""
        if self.unlimited:
            return False
        # 1e-9: float rounding must not refuse the last unit.
        if self._refilled(table, pk).tokens <= 1e-9:
            self.refused = (KEY_RANGE, table, wcu > 0)
            return True
        quota = self._quota(table)
        if (wcu and quota.write <= 1e-9) or (rcu and quota.read <= 1e-9):
            self.refused = (TABLE_QUOTA, table, bool(wcu and quota.write <= 1e-9))
            return True
        return False

    def _charge(self, table: str, pk: str, wcu: float, rcu: float) -> None:
        if self.unlimited:
            return
        # Charged in full, into debt if need be: a strict "enough for this request" rule let 1-WCU HEAD
        # updates starve every 20-WCU batch put on a saturated key, which DynamoDB does not show.
        self.tables[table][pk].tokens -= (wcu / WCU_PER_S + rcu / RCU_PER_S) / self.capacity_scale
        quota = self.quotas[table]
        quota.write -= wcu / (self.table_units_per_s * self.capacity_scale)
        quota.read -= rcu / (self.table_units_per_s * self.capacity_scale)
        used = self.table_units[(table, int(self.sim.now))]
        used[0] += rcu
        used[1] += wcu
        self.stats.wcu += wcu
        self.stats.rcu += rcu
        actor = self.sim.current
        role = actor.name.partition("-")[0] if actor else ""
        self.stats.wcu_by[role] += wcu
        self.stats.rcu_by[role] += rcu

    def peak_table_units(self) -> tuple[float, float]:
        """The most read and write units one table consumed in one virtual second, at full scale."""
        reads = max((r for r, _w in self.table_units.values()), default=0.0)
        writes = max((w for _r, w in self.table_units.values()), default=0.0)
        return reads / self.capacity_scale, writes / self.capacity_scale

    def _admit(self, table: str, pk: str, wcu: float, rcu: float) -> bool:
        if self._refuses(table, pk, wcu, rcu):
            return False
        self._charge(table, pk, wcu, rcu)
        return True

    def with_attempts(self, attempts: int) -> _WithAttempts:
        """This client as one configured for `attempts` attempts (`FAIL_FAST_CONFIG`)."""
        return _WithAttempts(self, attempts)

    def _attempts(self, operation: str, kind: str, run: Any) -> Any:
        """botocore's standard retry loop around one call: `run()` returns (ok, result, kb)."""
        actor = self.sim.current
        max_attempts = getattr(actor, "attempts", None) or self.max_attempts
        refused = self.refused
        for attempt in range(1, max_attempts + 1):
            self.stats.attempts[(operation, kind)] += 1
            ok, result, kb = run()
            refused = refused if ok else self.refused  # read now: other actors refuse during the sleep
            if operation in _WRITES:
                self.write_timeline[int(self.sim.now)][0 if ok else 1] += 1
            self.sim.sleep(self._latency(kb))
            if ok:
                if isinstance(result, ClientError):
                    raise result
                return result
            self.stats.throttles[(operation, kind)] += 1
            self.throttle_log.append(self.sim.now)
            if attempt < max_attempts:
                self.sim.sleep(self.rng.random() * min(2 ** (attempt - 1), 20))
        why, table, writes = refused
        raise why.error(operation, table, writes)

    # -- storage helpers --

    def _get(self, table: str, key: dict[str, Any]) -> tuple[str, str, dict[str, Any] | None]:
        pk, sk = key["pk"]["S"], key["sk"]["S"]
        part = self.tables[table].get(pk)
        return pk, sk, (part.items.get(sk) if part else None)

    def _read(
        self, table: str, key: dict[str, Any], consistent: bool
    ) -> tuple[str, str, dict[str, Any] | None]:
        """An item as a read of that consistency finds it: an eventually consistent one may be answered
        by the copy that lags (see the module's docstring)."""
        pk, sk, item = self._get(table, key)
        if consistent or not self.stale_max_s or self.stale_rng.random() >= STALE_SHARE:
            return pk, sk, item
        part = self.tables[table].get(pk)
        moment = self.sim.now - self.stale_rng.random() * self.stale_max_s
        return pk, sk, (part.as_of(sk, moment) if part else None)

    def _store(self, table: str, pk: str, sk: str, item: dict[str, Any] | None) -> None:
        part = self.tables[table][pk]
        if self.stale_max_s:
            part.remember(sk, self.sim.now, self.stale_max_s)
        if item is None:
            if part.items.pop(sk, None) is not None:
                del part.sks[bisect.bisect_left(part.sks, sk)]
            return
        if sk not in part.items:
            bisect.insort(part.sks, sk)
        part.items[sk] = item

    def _conditional(
        self, operation: str, table: str, pk: str, sk: str, old: dict[str, Any] | None, new: Any, kwargs: dict
    ) -> Any:
        """One conditional write attempt, shared by put/update/delete. `new(old)` builds the new item."""
        condition = kwargs.get("ConditionExpression")
        ctx = expr.Context(kwargs.get("ExpressionAttributeNames"), kwargs.get("ExpressionAttributeValues"))
        if condition and not expr.evaluate(expr.parse_condition(condition), old, ctx):
            if not self._admit(table, pk, write_units(old, None), 0):
                return False, None, 0
            self.stats.conditional_failures[(operation, _kind(sk))] += 1
            failed_item = old if kwargs.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" else None
            return True, _error("ConditionalCheckFailedException", operation, failed_item), 0
        item = new(old)
        if not self._admit(table, pk, write_units(old, item), 0):
            return False, None, 0
        self._store(table, pk, sk, item)
        return True, (old, item), (item_size(item) if item else 0) / 1024

    # -- the client API --

    def get_item(self, TableName: str, Key: dict, ConsistentRead: bool = False, **_: Any) -> dict:
        pk, sk, _item = self._get(TableName, Key)

        def run() -> tuple[bool, Any, float]:
            _, _, item = self._read(TableName, Key, ConsistentRead)
            size = item_size(item) if item else 0
            if not self._admit(TableName, pk, 0, read_units([size], ConsistentRead, True)):
                return False, None, 0
            return True, ({"Item": item} if item else {}), size / 1024

        return self._attempts("GetItem", _kind(sk), run)

    def put_item(self, TableName: str, Item: dict, **kwargs: Any) -> dict:
        pk, sk = Item["pk"]["S"], Item["sk"]["S"]
        _refuse_oversized(Item, "PutItem")

        def run() -> tuple[bool, Any, float]:
            old = self.tables[TableName][pk].items.get(sk)
            return self._conditional("PutItem", TableName, pk, sk, old, lambda _old: dict(Item), kwargs)

        self._attempts("PutItem", _kind(sk), run)
        return {}

    def update_item(
        self, TableName: str, Key: dict, UpdateExpression: str, ReturnValues: str = "NONE", **kwargs: Any
    ) -> dict:
        pk, sk = Key["pk"]["S"], Key["sk"]["S"]
        actions = expr.parse_update(UpdateExpression)
        ctx = expr.Context(kwargs.get("ExpressionAttributeNames"), kwargs.get("ExpressionAttributeValues"))

        def build(old: dict[str, Any] | None) -> dict[str, Any]:
            new = expr.apply_update(actions, old or dict(Key), ctx)
            _refuse_oversized(new, "UpdateItem")
            return new

        def run() -> tuple[bool, Any, float]:
            old = self.tables[TableName][pk].items.get(sk)
            return self._conditional("UpdateItem", TableName, pk, sk, old, build, kwargs)

        old, new = self._attempts("UpdateItem", _kind(sk), run)
        if ReturnValues == "ALL_NEW":
            return {"Attributes": new}
        if ReturnValues == "ALL_OLD":
            return {"Attributes": old} if old else {}
        if ReturnValues == "UPDATED_NEW":
            changed = {expr.Context(kwargs.get("ExpressionAttributeNames"), None).attr(a[1]) for a in actions}
            return {"Attributes": {k: v for k, v in new.items() if k in changed}}
        return {}

    def transact_write_items(self, TransactItems: list[dict]) -> dict:
        """Updates only (what the engine sends), all or none. Two write units an item ("Transactional
        write requests require two WCUs per item": DynamoDB developer guide, "Read/write capacity mode"),
        charged on its partition, cancelled or not; at most 100 items ("TransactWriteItems", API
        reference; no two on one item). A cancellation answers `TransactionCanceledException` with a reason
        per item."""
        if len(TransactItems) > MAX_TRANSACT_ITEMS:
            raise _error(
                VALIDATION, "TransactWriteItems", message="Member must have length less than or equal to 100"
            )
        requests = []
        for entry in TransactItems:
            update = entry["Update"]
            pk, sk = update["Key"]["pk"]["S"], update["Key"]["sk"]["S"]
            ctx = expr.Context(
                update.get("ExpressionAttributeNames"), update.get("ExpressionAttributeValues")
            )
            requests.append((update, pk, sk, ctx))
        if len({(u["TableName"], pk, sk) for u, pk, sk, _ctx in requests}) < len(requests):
            raise _error(
                VALIDATION,
                "TransactWriteItems",
                message="Transaction request cannot include multiple operations on one item",
            )

        def run() -> tuple[bool, Any, float]:
            olds = [self.tables[u["TableName"]][pk].items.get(sk) for u, pk, sk, _ctx in requests]
            reasons, news = [], []
            for (update, _pk, _sk, ctx), old in zip(requests, olds, strict=True):
                condition = update.get("ConditionExpression")
                ok = not condition or expr.evaluate(expr.parse_condition(condition), old, ctx)
                reasons.append({"Code": "None" if ok else "ConditionalCheckFailed"})
                new = expr.apply_update(
                    expr.parse_update(update["UpdateExpression"]), old or dict(update["Key"]), ctx
                )
                _refuse_oversized(new, "TransactWriteItems")
                news.append(new)
            if sum(item_size(n) for n in news) > MAX_TRANSACT_BYTES:
                raise _error(
                    VALIDATION,
                    "TransactWriteItems",
                    message="The aggregate size of the items in the transaction cannot exceed 4 MB",
                )
            units = [2 * write_units(old, new) for old, new in zip(olds, news, strict=True)]
            if any(self._refuses(u["TableName"], pk, 1, 0) for u, pk, _sk, _ctx in requests):
                return False, None, 0
            for (update, pk, _sk, _ctx), wcu in zip(requests, units, strict=True):
                self._charge(update["TableName"], pk, wcu, 0)
            if any(r["Code"] != "None" for r in reasons):
                self.stats.conditional_failures[("TransactWriteItems", "G#")] += 1
                error = _error("TransactionCanceledException", "TransactWriteItems")
                error.response["CancellationReasons"] = reasons
                return True, error, 0
            for (update, pk, sk, _ctx), new in zip(requests, news, strict=True):
                self._store(update["TableName"], pk, sk, new)
            return True, {}, sum(item_size(n) for n in news) / 1024

        return self._attempts("TransactWriteItems", "G#", run)

    def delete_item(self, TableName: str, Key: dict, **kwargs: Any) -> dict:
        pk, sk = Key["pk"]["S"], Key["sk"]["S"]

        def run() -> tuple[bool, Any, float]:
            old = self.tables[TableName][pk].items.get(sk)
            if old is None and not kwargs.get("ConditionExpression"):
                return (True, (None, None), 0) if self._admit(TableName, pk, 1, 0) else (False, None, 0)
            return self._conditional("DeleteItem", TableName, pk, sk, old, lambda _old: None, kwargs)

        self._attempts("DeleteItem", _kind(sk), run)
        return {}

    def batch_get_item(self, RequestItems: dict) -> dict:
        """One attempt: throttled keys come back unprocessed (the adapter sends them again after its
        pause, which `TwinTable.pause` spends in virtual time)."""
        if sum(len(request["Keys"]) for request in RequestItems.values()) > MAX_BATCH_GET_KEYS:
            raise _error(VALIDATION, "BatchGetItem", message=_TOO_MANY.format("BatchGetItem"))
        responses: dict[str, list] = {}
        unprocessed: dict[str, dict] = {}
        kb = 0.0
        read_any = throttled = False
        refused = self.refused
        kinds = set()
        for table, request in RequestItems.items():
            consistent = request.get("ConsistentRead", False)
            for key in request["Keys"]:
                pk, sk, item = self._read(table, key, consistent)
                kinds.add(_kind(sk))
                size = item_size(item) if item else 0
                full = kb * 1024 + size > MAX_BATCH_GET_BYTES  # past the response's 16 MB: unprocessed
                if full or not self._admit(table, pk, 0, read_units([size], consistent, True)):
                    if not full:
                        throttled, refused = True, self.refused
                    unprocessed.setdefault(table, {"Keys": [], "ConsistentRead": consistent})["Keys"].append(
                        key
                    )
                    continue
                read_any = True
                if item:
                    responses.setdefault(table, []).append(item)
                    kb += size / 1024
        kind = "+".join(sorted(kinds))
        self.stats.attempts[("BatchGetItem", kind)] += 1
        self.sim.sleep(self._latency(kb))
        if throttled:
            self.stats.throttles[("BatchGetItem", kind)] += 1
            self.throttle_log.append(self.sim.now)
            if not read_any:
                why, table, _writes = refused
                raise why.error("BatchGetItem", table, False)
        return {"Responses": responses, "UnprocessedKeys": unprocessed}

    def batch_write_item(self, RequestItems: dict) -> dict:
        if sum(len(requests) for requests in RequestItems.values()) > MAX_BATCH_WRITE_REQUESTS:
            raise _error(VALIDATION, "BatchWriteItem", message=_TOO_MANY.format("BatchWriteItem"))
        for requests in RequestItems.values():
            for request in requests:
                _refuse_oversized(request.get("PutRequest", {}).get("Item"), "BatchWriteItem")
        unprocessed: dict[str, list] = {}
        for table, requests in RequestItems.items():
            for request in requests:
                if "DeleteRequest" in request:
                    key = request["DeleteRequest"]["Key"]
                    pk, sk, old = self._get(table, key)
                    if self._admit(table, pk, write_units(old, None), 0):
                        self._store(table, pk, sk, None)
                        continue
                else:
                    item = request["PutRequest"]["Item"]
                    pk, sk, old = self._get(table, item)
                    if self._admit(table, pk, write_units(old, item), 0):
                        self._store(table, pk, sk, item)
                        continue
                unprocessed.setdefault(table, []).append(request)
        self.stats.attempts[("BatchWriteItem", "any")] += 1
        self.sim.sleep(self._latency())
        if unprocessed:
            self.stats.throttles[("BatchWriteItem", "any")] += 1
        return {"UnprocessedItems": unprocessed}

    def query(
        self, TableName: str, KeyConditionExpression: str, ExpressionAttributeValues: dict, **kwargs: Any
    ) -> dict:
        names = kwargs.get("ExpressionAttributeNames")
        ctx = expr.Context(names, ExpressionAttributeValues)
        tree = expr.parse_condition(KeyConditionExpression)
        pk = _pk_of(tree, ctx)
        limit = kwargs.get("Limit")
        forward = kwargs.get("ScanIndexForward", True)
        start = kwargs.get("ExclusiveStartKey")
        consistent = kwargs.get("ConsistentRead", False)
        kind = "Query"

        def run() -> tuple[bool, Any, float]:
            part = self.tables[TableName].get(pk)
            found: list[dict[str, Any]] = []
            last = None
            size = 0
            if part is not None:
                sks = part.sks if forward else list(reversed(part.sks))
                lo = 0
                if start is not None and forward:
                    lo = bisect.bisect_right(part.sks, start["sk"]["S"])
                elif forward:
                    lo = bisect.bisect_left(part.sks, _sk_lower(tree, ctx))
                elif start is not None:
                    lo = len(part.sks) - bisect.bisect_left(part.sks, start["sk"]["S"])
                for sk in sks[lo:]:
                    item = part.items[sk]
                    if not expr.evaluate(tree, item, ctx):
                        if forward and _past_upper(tree, ctx, sk):
                            break
                        continue
                    item_bytes = item_size(item)
                    if found and size + item_bytes > MAX_PAGE_BYTES:  # the page is full
                        last = {"pk": found[-1]["pk"], "sk": found[-1]["sk"]}
                        break
                    found.append(item)
                    size += item_bytes
                    if limit is not None and len(found) >= limit:
                        last = {"pk": item["pk"], "sk": item["sk"]}
                        break
            sizes = [item_size(i) for i in found]
            if not self._admit(TableName, pk, 0, read_units(sizes, consistent, False)):
                return False, None, 0
            resp: dict[str, Any] = {"Items": found, "Count": len(found)}
            if last is not None:
                resp["LastEvaluatedKey"] = last
            return True, resp, sum(sizes) / 1024

        return self._attempts("Query", kind, run)


def _comparisons(tree: tuple) -> list[tuple]:
    if tree[0] == "and":
        return _comparisons(tree[1]) + _comparisons(tree[2])
    return [tree]


def _string(ctx: expr.Context, operand: tuple) -> str:
    value = ctx.resolve(operand, None)
    if value is None:
        raise expr.Unsupported("key condition on a value that is not given")
    return value["S"]


def _pk_of(tree: tuple, ctx: expr.Context) -> str:
    for part in _comparisons(tree):
        if part[0] == "cmp" and part[1] == "=" and ctx.attr(part[2]) == "pk":
            return _string(ctx, part[3])
    raise expr.Unsupported("key condition without pk = :value")


def _sk_lower(tree: tuple, ctx: expr.Context) -> str:
    for part in _comparisons(tree):
        if part[0] == "between" and ctx.attr(part[1]) == "sk":
            return _string(ctx, part[2])
        if part[0] == "begins_with" and ctx.attr(part[1]) == "sk":
            return _string(ctx, part[2])
        if part[0] == "cmp" and part[1] in (">=", ">", "=") and ctx.attr(part[2]) == "sk":
            return _string(ctx, part[3])
    return ""


def _past_upper(tree: tuple, ctx: expr.Context, sk: str) -> bool:
    for part in _comparisons(tree):
        if part[0] == "between" and ctx.attr(part[1]) == "sk":
            return sk > _string(ctx, part[3])
        if part[0] == "begins_with" and ctx.attr(part[1]) == "sk":
            return sk > _string(ctx, part[2]) and not sk.startswith(_string(ctx, part[2]))
        if part[0] == "cmp" and part[1] in ("<=", "<") and ctx.attr(part[2]) == "sk":
            return sk > _string(ctx, part[3])
    return False


class _WithAttempts:
    """A TwinDynamo whose calls retry `attempts` times (another botocore config over the same service)."""

    def __init__(self, twin: TwinDynamo, attempts: int) -> None:
        self._twin = twin
        self._n = attempts

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._twin, name)

        def with_attempts(*args: Any, **kwargs: Any) -> Any:
            actor: Any = self._twin.sim.current
            if actor is None:  # set-up outside any actor
                return call(*args, **kwargs)
            before = getattr(actor, "attempts", None)
            actor.attempts = self._n  # read by `_attempts` for this actor's call only
            try:
                return call(*args, **kwargs)
            finally:
                actor.attempts = before

        return with_attempts
