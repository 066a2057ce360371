"""The coordinator: one lease holder at a time reads shard counters and backlogs, then changes shard maps.

A pass, per queue: read every readable shard's HEAD and each group's state item (BatchGetItem), turn
the counters into rates against the snapshot of the previous pass, ask the pure policy
(`sluice.engine.scaling.decide`) what to do, publish the new map with a fenced conditional write, seal
the HEAD items of sealed shards, start push workers and send the shard work that
`sluice.engine.workplan.plan` decides (flush, compaction, retention; the same policy in AWS and locally).

Fencing: the lease item holds a token that grows with every new holder. Every map write carries it
(`QueueRegistry.modify(fence=token)`, condition `fence <= :f`), and a coordinator that took over an
expired lease stamps its token on every queue before acting, so a stale coordinator that still
believes it holds the lease fails its conditional write instead of overwriting a newer map.
See docs/design.md "Coordinator" for the sealing order argument.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from sluice import constants as c
from sluice import errors
from sluice.adapters.dynamo import ConditionFailed, batch_get_across
from sluice.engine import counters as cnt
from sluice.engine import keys
from sluice.engine.groupstate import GroupState
from sluice.engine.push import ConsumerStore, PushConsumer, worker_count
from sluice.engine.scaling import Decision, QueueObservation, ScalingPolicy, ShardObservation, decide
from sluice.engine.workplan import ShardHead, ShardWorkPolicy, plan
from sluice.events import PushWorker, PushWorkerEvent, ShardWorkEvent
from sluice.models import Queue, Shard
from sluice.service import Sluice
from sluice.settings import CoordinatorSettings

log = logging.getLogger(__name__)

COORDINATOR_PK = "COORDINATOR"
STATE_SK_PREFIX = "STATE#"
RETIRED_KEPT = 16  # retired shards kept in the map for lineage; older ones are dropped
MIRROR_CHECKED_AT = "mir"  # per-queue state: when the SSM mirror was last checked against the item
MIRROR_CHECK_EVERY_MS = 60_000


class Invoker(Protocol):
    """Starts another function without waiting (Lambda InvocationType=Event; the local runtime's pools)."""

    def invoke_async(self, function: str, event: dict[str, Any]) -> None: ...


@dataclass
class CoordinatorConfig:
    policy: ScalingPolicy = field(default_factory=ScalingPolicy)
    work: ShardWorkPolicy = field(default_factory=ShardWorkPolicy)
    lease_ms: int = 60_000
    period_s: float = c.DEFAULT_COORDINATOR_TICK_SECONDS  # between passes of one run
    loop_s: float = 0.0  # how long one scheduled run keeps passing (the stack sets rule period - tick)
    shard_function: str | None = None
    consumer_function: str | None = None
    push_batches_per_worker: int = 4  # k in workers = min(max_concurrency, ceil(backlog / batch / k))
    lease_name: str = "LEASE"
    queues: list[str] | None = None  # only these queues (tests); None: every queue

    @classmethod
    def from_settings(cls, s: CoordinatorSettings) -> CoordinatorConfig:
        """The deployed configuration (`sluice.settings`); what is unset keeps these defaults."""
        policy = ScalingPolicy()
        if s.shard_wcu_ceiling is not None:
            policy = _replace(policy, shard_wcu_ceiling=s.shard_wcu_ceiling)
        if s.scale_down_after_seconds is not None:
            policy = _replace(policy, scale_down_after_ms=int(s.scale_down_after_seconds * 1000))
        work = ShardWorkPolicy()
        if s.shard_flush_seconds is not None:
            work = _replace(work, flush_every_ms=int(s.shard_flush_seconds * 1000))
        if s.shard_maintenance_seconds is not None:
            work = _replace(work, maintenance_every_ms=int(s.shard_maintenance_seconds * 1000))
        config = cls(
            policy=policy, work=work, shard_function=s.shard_function, consumer_function=s.consumer_function
        )
        if s.period_seconds is not None:
            config.period_s = s.period_seconds
        if s.loop_seconds is not None:
            config.loop_s = s.loop_seconds
        if s.lease_seconds is not None:
            config.lease_ms = int(s.lease_seconds * 1000)
        return config


def _replace(policy: Any, **changes: Any) -> Any:
    from dataclasses import replace

    return replace(policy, **changes)


# --- the lease ---------------------------------------------------------------------------------------------


class CoordinatorLease:
    """A control item `COORDINATOR`/`LEASE`: holder, expiry `exp` (ms), fencing token `tok`, `rel`eased.

    Taken with one conditional update when absent, expired or released; renewed only by the holder
    whose token is still the stored one. The token grows with every new holder.
    """

    def __init__(self, engine: Sluice, holder: str, lease_ms: int, name: str = "LEASE") -> None:
        self.table = engine.backend.control
        self.clock = engine.backend.clock
        self.holder = holder
        self.lease_ms = lease_ms
        self.sk = name
        self.token: int | None = None
        self.expires_ms = 0
        self.took_over_expired = False  # the previous holder did not release: it may still be running
        self.seen: dict[str, Any] = {}  # the lease as it was when we could not take it

    def valid(self) -> bool:
        """Still ours by our own clock, with a margin so we stop before anyone else may start."""
        return self.token is not None and self.clock() < self.expires_ms - self.lease_ms // 10

    def acquire(self) -> bool:
        now = self.clock()
        expires = now + self.lease_ms
        if self.token is not None:
            try:
                self.table.update(
                    COORDINATOR_PK,
                    self.sk,
                    "SET #e = :e, #r = :f",
                    condition="#h = :me AND #t = :tok",
                    names={"#e": "exp_ms", "#r": "rel", "#h": "holder", "#t": "tok"},
                    values={":e": expires, ":f": False, ":me": self.holder, ":tok": self.token},
                )
                self.expires_ms, self.took_over_expired = expires, False
                return True
            except ConditionFailed as exc:
                log.warning("coordinator %s lost its lease (token %s): %s", self.holder, self.token, exc.item)
                self.token = None
        try:
            old = self.table.update(
                COORDINATOR_PK,
                self.sk,
                "SET #h = :me, #e = :e, #r = :f, #t = if_not_exists(#t, :z) + :one",
                condition="attribute_not_exists(pk) OR #e < :now OR #r = :true",
                names={"#h": "holder", "#e": "exp_ms", "#r": "rel", "#t": "tok"},
                values={
                    ":me": self.holder,
                    ":e": expires,
                    ":f": False,
                    ":z": 0,
                    ":one": 1,
                    ":now": now,
                    ":true": True,
                },
                returns="ALL_OLD",
            )
        except ConditionFailed as exc:
            self.seen = exc.item or self.table.get(COORDINATOR_PK, self.sk) or {}
            return False
        old = old or {}
        self.token = int(old.get("tok", 0)) + 1
        self.expires_ms = expires
        self.took_over_expired = bool(old) and not old.get("rel") and old.get("holder") != self.holder
        return True

    def release(self) -> None:
        if self.token is None:
            return
        with contextlib.suppress(ConditionFailed):
            self.table.update(
                COORDINATOR_PK,
                self.sk,
                "SET #r = :true, #e = :z",
                condition="#h = :me AND #t = :tok",
                names={"#r": "rel", "#e": "exp_ms", "#h": "holder", "#t": "tok"},
                values={":true": True, ":z": 0, ":me": self.holder, ":tok": self.token},
            )
        self.token = None


# --- reports -----------------------------------------------------------------------------------------------


@dataclass
class QueueReport:
    queue: str
    open_shards: int = 0
    sealed_shards: int = 0
    backlog: dict[str, int] = field(default_factory=dict)  # per consumer group
    oldest_message_age_s: float = 0.0
    writes_per_s: float = 0.0  # messages/s over the last period
    throttles_per_s: float = 0.0
    added: list[int] = field(default_factory=list)
    sealed: list[int] = field(default_factory=list)
    retired: list[int] = field(default_factory=list)
    push_workers_started: int = 0
    shard_work: list[dict[str, Any]] = field(default_factory=list)  # ShardWorkEvent payloads sent
    reason: str = ""

    @property
    def total_backlog(self) -> int:
        return max(self.backlog.values(), default=0)


@dataclass
class RunReport:
    holder: str
    acted: bool
    token: int | None = None
    message: str = ""
    queues: list[QueueReport] = field(default_factory=list)


# --- the coordinator ---------------------------------------------------------------------------------------


@dataclass
class _ShardRead:
    shard: Shard
    head: dict[str, Any]
    states: dict[str, GroupState]

    @property
    def next(self) -> int:
        return int(self.head.get("next", 0))


class Coordinator:
    def __init__(
        self,
        engine: Sluice,
        invoker: Invoker | None = None,
        config: CoordinatorConfig | None = None,
        holder: str | None = None,
    ) -> None:
        self.engine = engine
        self.backend = engine.backend
        self.invoker = invoker
        self.config = config or CoordinatorConfig()
        self.holder = holder or f"coordinator-{uuid.uuid4().hex[:12]}"
        self.lease = CoordinatorLease(engine, self.holder, self.config.lease_ms, self.config.lease_name)
        self.consumers = ConsumerStore(engine.backend)

    # -- entry points --

    def run(
        self, loop_seconds: float = 0.0, sleep: Any = time.sleep, period_s: float | None = None
    ) -> list[RunReport]:
        """Passes every `period_s` (default: the config's tick) for `loop_seconds` (one pass when 0);
        the lease is released at the end."""
        period = self.config.period_s if period_s is None else period_s
        reports = []
        deadline = time.monotonic() + loop_seconds
        try:
            while True:
                started = time.monotonic()
                reports.append(self.run_once())
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                sleep(min(left, max(0.0, period - (time.monotonic() - started))))
        finally:
            self.lease.release()
        return reports

    def run_once(self) -> RunReport:
        if not self.lease.acquire():
            seen = self.lease.seen
            message = (
                f"coordinator {self.holder} stands down: the lease is held by {seen.get('holder')} "
                f"(token {seen.get('tok')}) until {seen.get('exp_ms')}"
            )
            log.info(message)
            return RunReport(self.holder, acted=False, message=message)
        token = self.lease.token
        assert token is not None
        report = RunReport(self.holder, acted=True, token=token, message=f"holding lease, token {token}")
        names = self._queue_names()
        if self.lease.took_over_expired:
            self._stamp_fence(names, token)
        for name in names:
            if not self.lease.valid():
                report.message = f"lease (token {token}) ran out during the pass; stopping"
                log.warning(report.message)
                break
            try:
                report.queues.append(self.run_queue(name, token))
            except errors.QueueNotFound:
                continue
            except errors.Conflict as exc:
                report.message = f"stood down on queue {name!r}: {exc.message}"
                log.warning("coordinator %s %s", self.holder, report.message)
                self.lease.token = None
                break
        return report

    # -- per queue --

    def run_queue(self, name: str, token: int) -> QueueReport:
        queue = self.engine.queues.get(name)
        now = self.backend.clock()
        reads = self._read_shards(queue)
        state = self._load_state(queue)
        if now - int(state.get(MIRROR_CHECKED_AT, 0)) >= MIRROR_CHECK_EVERY_MS:
            self.engine.queues.repair_mirror(queue)  # an SSM read: once a minute, not every tick
            state[MIRROR_CHECKED_AT] = now
        prev_at = state.get("at")
        prev_counts: dict[str, list[int]] = state.get("c", {})
        dt = (now - prev_at) / 1000 if prev_at else 0.0
        flushed_cache: dict[int, bool] = {}

        shard_obs = []
        counts: dict[str, list[int]] = {}
        for read in reads:
            current = [int(read.head.get(attr, 0)) for attr in cnt.COUNTER_ATTRIBUTES]
            counts[str(read.shard.id)] = current
            before = prev_counts.get(str(read.shard.id), [0] * len(current))
            rates = [max(0, a - b) / dt if dt > 0 else 0.0 for a, b in zip(current, before, strict=True)]
            drained = self._drained(queue, read)
            flushed = True
            if read.shard.state == "sealed" and drained and queue.settings.bottomless:
                flushed = flushed_cache.setdefault(
                    read.shard.id, shard_is_flushed(self.engine, queue, read.shard, read.next)
                )
            shard_obs.append(
                ShardObservation(
                    id=read.shard.id,
                    state=read.shard.state,
                    requests_per_s=rates[0],
                    messages_per_s=rates[1],
                    bytes_per_s=rates[2],
                    throttles_per_s=rates[3],
                    conflicts_per_s=rates[4],
                    head_sealed=bool(read.head.get("sealed")),
                    drained=drained,
                    flushed=flushed,
                )
            )
        obs = QueueObservation(
            name=queue.name,
            min_shards=queue.settings.min_shards,
            max_shards=queue.settings.max_shards,
            shards=shard_obs,
            now_ms=now,
            ordered=queue.settings.ordered,
            low_since_ms=state.get("low"),
        )
        decision = decide(obs, self.config.policy) if dt > 0 else _first_pass(obs)
        report = QueueReport(queue=queue.name, reason=decision.reason)
        report.writes_per_s = sum(s.messages_per_s for s in shard_obs)
        report.throttles_per_s = sum(s.throttles_per_s for s in shard_obs)
        report.backlog = self._backlog(queue, reads)
        report.oldest_message_age_s = self._oldest_age(queue, reads, now)

        if decision.changes_map:
            queue = self._apply(queue, decision, token, report)
        self._seal_heads(queue, reads)
        work = self._plan_shard_work(queue, reads, state, now)  # marks its cadence in `state`
        self._save_state(queue, now, counts, decision.low_since_ms, state)
        report.open_shards = len(queue.open_shards)
        report.sealed_shards = sum(1 for s in queue.shards if s.state == "sealed")
        report.push_workers_started = self._start_push_workers(queue, reads, now)
        report.shard_work = [event.to_payload() for event in work]
        if self.invoker is not None and self.config.shard_function:
            for payload in report.shard_work:
                self.invoker.invoke_async(self.config.shard_function, payload)
        if decision.changes_map:
            log.info(
                "queue %s: +%d shards, sealed %s, retired %s (%s)",
                queue.name,
                len(report.added),
                report.sealed,
                report.retired,
                decision.reason,
            )
        return report

    def _apply(self, queue: Queue, decision: Decision, token: int, report: QueueReport) -> Queue:
        """The new map first, with the fencing token; HEAD seals follow (`_seal_heads`)."""
        now = self.backend.clock()
        tables = len(self.backend.shard_tables)

        def change(current: Queue) -> Queue:
            shards = [s.model_copy() for s in current.shards]
            open_ids = [s.id for s in shards if s.state == "open"]
            for shard in shards:
                if shard.id in decision.seal and shard.state == "open" and len(open_ids) > 1:
                    shard.state = "sealed"
                    open_ids.remove(shard.id)
                elif shard.id in decision.retire and shard.state == "sealed":
                    shard.state = "retired"
            retired = [s for s in shards if s.state == "retired"]
            drop = {s.id for s in retired[: max(0, len(retired) - RETIRED_KEPT)]}
            shards = [s for s in shards if s.id not in drop]
            first = current.next_shard_id
            for sid in range(first, first + decision.add):
                shards.append(Shard(id=sid, table=sid % tables, created_ms=now))
            return current.model_copy(update={"shards": shards, "next_shard_id": first + decision.add})

        before = {s.id: s.state for s in queue.shards}
        updated = self.engine.queues.modify(queue.name, change, fence=token)
        after = {s.id: s.state for s in updated.shards}
        report.added = [sid for sid in after if sid not in before]
        report.sealed = [sid for sid, st in after.items() if st == "sealed" and before.get(sid) == "open"]
        report.retired = [sid for sid, st in after.items() if st == "retired" and before.get(sid) == "sealed"]
        return updated

    def _seal_heads(self, queue: Queue, reads: list[_ShardRead]) -> None:
        """Every shard the map says is sealed gets `sealed` on its HEAD (idempotent: also repairs a pass
        that died between the map write and this step)."""
        head_sealed = {r.shard.id for r in reads if r.head.get("sealed")}
        now = self.backend.clock()
        for shard in queue.shards:
            if shard.state != "sealed" or shard.id in head_sealed:
                continue
            self.backend.table_for(shard).update(
                keys.shard_pk(queue, shard.id),
                keys.HEAD_SK,
                "SET #s = :t, #sm = :now",
                names={"#s": "sealed", "#sm": "sealed_ms"},
                values={":t": True, ":now": now},
            )

    # -- reads --

    def _queue_names(self) -> list[str]:
        if self.config.queues is not None:
            return list(self.config.queues)
        names: list[str] = []
        after: str | None = None
        while True:
            page = [
                item["sk"]
                for item in self.backend.control.query(
                    keys.QUEUE_INDEX_PK, sk_from=(after + "\x00") if after else None, limit=1000
                )
            ]
            names += page
            if len(page) < 1000:
                return names
            after = page[-1]

    def _stamp_fence(self, names: list[str], token: int) -> None:
        """After taking over an expired lease: raise every queue's fence to our token first, so the
        previous holder, if it is still running, fails its next map write."""
        for name in names:
            try:
                queue = self.engine.queues.get(name)
                if queue.fence < token:
                    self.engine.queues.modify(name, lambda q: q, fence=token)
            except errors.QueueNotFound:
                continue

    def _read_shards(self, queue: Queue) -> list[_ShardRead]:
        groups = sorted(queue.groups)
        shards = queue.readable_shards
        per_call = max(1, 100 // (1 + len(groups)))
        reads = []
        for start in range(0, len(shards), per_call):
            chunk = shards[start : start + per_call]
            requests: dict[Any, list[tuple[str, str]]] = {}
            for shard in chunk:
                pk = keys.shard_pk(queue, shard.id)
                requests.setdefault(self.backend.table_for(shard), []).extend(
                    [(pk, keys.HEAD_SK), *((pk, keys.group_state_sk(g)) for g in groups)]
                )
            items = batch_get_across(requests)
            for shard in chunk:
                table = self.backend.table_for(shard).name
                pk = keys.shard_pk(queue, shard.id)
                states = {}
                for group in groups:
                    raw = items.get((table, pk, keys.group_state_sk(group)))
                    states[group] = GroupState.decode(raw["s"], raw["ver"]) if raw else GroupState()
                reads.append(_ShardRead(shard, items.get((table, pk, keys.HEAD_SK), {}), states))
        return reads

    @staticmethod
    def _drained(queue: Queue, read: _ShardRead) -> bool:
        """Sealed HEAD (its `next` is final) and every group's ack level at or past it."""
        if not read.head.get("sealed"):
            return False
        return all(read.states[g].ack_level >= read.next for g in queue.groups)

    @staticmethod
    def _backlog(queue: Queue, reads: list[_ShardRead]) -> dict[str, int]:
        return {
            g: sum(max(0, r.next - r.states[g].read) + len(r.states[g].pending) for r in reads)
            for g in sorted(queue.groups)
        }

    def _oldest_age(self, queue: Queue, reads: list[_ShardRead], now: int) -> float:
        """Age of the oldest unacked message over groups: one BatchGetItem of the items holding each
        group's ack level (at most 100 shardxgroup pairs, the largest backlogs first)."""
        wanted: dict[tuple[str, str], tuple[Any, str]] = {}
        candidates = []
        for read in reads:
            for _group, st in read.states.items():
                backlog = max(0, read.next - st.read) + len(st.pending)
                if backlog <= 0:
                    continue
                seq = st.ack_level
                item = st.pending[seq].item if seq in st.pending else st.read_item
                candidates.append((backlog, read.shard, item))
        candidates.sort(key=lambda x: -x[0])
        requests: dict[Any, list[tuple[str, str]]] = {}
        for _, shard, item in candidates[:100]:
            pk, sk = keys.shard_pk(queue, shard.id), keys.msg_sk(item)
            table = self.backend.table_for(shard)
            if (pk, sk) not in wanted:
                wanted[(pk, sk)] = (table, sk)
                requests.setdefault(table, []).append((pk, sk))
        if not requests:
            return 0.0
        found = batch_get_across(requests, consistent=False)
        stamps = [it["ts"] for it in found.values() if it.get("ts")]
        return max(0.0, (now - min(stamps)) / 1000) if stamps else 0.0

    # -- coordinator state between passes --

    def _load_state(self, queue: Queue) -> dict[str, Any]:
        item = self.backend.control.get(COORDINATOR_PK, STATE_SK_PREFIX + queue.name)
        if not item or item.get("inc") != queue.incarnation:
            return {}
        return json.loads(item["doc"])

    def _save_state(
        self, queue: Queue, now: int, counts: dict[str, list[int]], low: int | None, old: dict[str, Any]
    ) -> None:
        doc = {**old, "at": now, "c": counts, "low": low}
        self.backend.control.put(
            {
                "pk": COORDINATOR_PK,
                "sk": STATE_SK_PREFIX + queue.name,
                "inc": queue.incarnation,
                "doc": json.dumps(doc, separators=(",", ":")),
            }
        )
        old.clear()
        old.update(doc)

    # -- work started elsewhere --

    def _start_push_workers(self, queue: Queue, reads: list[_ShardRead], now: int) -> int:
        if self.invoker is None or not self.config.consumer_function:
            return 0
        started = 0
        backlog = self._backlog(queue, reads)
        for consumer in self.consumers.list(queue):
            if consumer.consumer_group not in queue.groups:
                continue
            want = worker_count(
                backlog.get(consumer.consumer_group, 0), consumer, self.config.push_batches_per_worker
            )
            if want <= 0:
                continue
            held = self.consumers.held_slots(queue, consumer.id, now)
            for slot in range(want):
                if slot in held:
                    continue
                event = PushWorkerEvent(push=PushWorker(queue=queue.name, consumer_id=consumer.id, slot=slot))
                self.invoker.invoke_async(self.config.consumer_function, event.to_payload())
                started += 1
        return started

    def _plan_shard_work(
        self, queue: Queue, reads: list[_ShardRead], state: dict[str, Any], now: int
    ) -> list[ShardWorkEvent]:
        """The shard-work policy's events for this pass (none when no shard function is wired)."""
        if self.invoker is None or not self.config.shard_function:
            return []
        states = {s.id: s.state for s in queue.shards}
        heads = [
            ShardHead.of(r.shard.id, states.get(r.shard.id, r.shard.state), r.head)
            for r in reads
            if states.get(r.shard.id) in ("open", "sealed")
        ]
        return plan(queue, heads, state, now, self.config.work)


def _first_pass(obs: QueueObservation) -> Decision:
    """No earlier snapshot: no rates yet, so only retirement (which needs none) is decided."""
    retire = sorted(
        s.id for s in obs.shards if s.state == "sealed" and s.head_sealed and s.drained and s.flushed
    )
    return Decision(retire=retire, low_since_ms=obs.low_since_ms, reason="first pass: measuring rates")


def shard_is_flushed(engine: Sluice, queue: Queue, shard: Shard, head_next: int) -> bool:
    """Every sequence below `head_next` is in an S3 segment (bottomless queues).

    Reads the segment index of docs/design.md ("Segments"): items `SEG#<queue>#<incarnation>#<shard>`
    with sort key `<first seq>` and `last`; the newest one must reach `head_next - 1`. Owned jointly
    with the shard Lambda (branch `streams`), which writes the index.
    """
    if head_next <= 0:
        return True
    pk = f"SEG#{queue.name}#{queue.incarnation}#{shard.id}"
    newest = next(iter(engine.backend.control.query(pk, forward=False, limit=1, consistent=True)), None)
    return newest is not None and int(newest.get("last", -1)) + 1 >= head_next


__all__ = [
    "Coordinator",
    "CoordinatorConfig",
    "CoordinatorLease",
    "Invoker",
    "PushConsumer",
    "QueueReport",
    "RunReport",
    "shard_is_flushed",
]
