"""The coordinator's pass: one owner at a time reads shard counters and backlogs, then changes shard maps.

A pass, per queue: read every readable shard's HEAD and each group's state item (BatchGetItem), turn
the counters into rates against the snapshot of the previous pass, ask the pure policy
(`sluice.engine.scaling.decide`) what to do, publish the new map with a fenced conditional write, seal
the HEAD items of sealed shards, start push workers and send the shard work that
`sluice.engine.workplan.plan` decides (flush, compaction, retention; the same policy in AWS and locally).

Fencing: the ownership item (`sluice.engine.ownership`) holds a token that grows with every new owner.
Every map write carries it (`QueueRegistry.modify(fence=token)`, condition `fence <= :f`), and a
coordinator that took over an expired ownership stamps its token on every queue before acting, so a
stale coordinator that still believes it owns the pass fails its conditional write instead of
overwriting a newer map. See docs/design.md "Coordinator" for the sealing order argument.

Multi-region: a coordinator runs in every region and passes over its own region's shards only (their
load, scaling, sealing, retirement, shard work, push workers for their backlog, its region's SSM
mirror); its ownership item, fencing token and saved state are its region's. It also gives a queue
`min_shards` open shards in its region when the queue has none there (a region added later).
"""

from __future__ import annotations

import logging
import uuid

from sluice import errors
from sluice.engine import keys, wake
from sluice.engine.backend import Backend
from sluice.engine.coordinator import observe
from sluice.engine.coordinator.config import CoordinatorConfig, Invoker
from sluice.engine.coordinator.dispatch import Dispatcher
from sluice.engine.coordinator.reports import Figures, QueueReport, RunReport
from sluice.engine.coordinator.state import SavedState, StateStore
from sluice.engine.ownership import Ownership
from sluice.engine.queues import QueueRegistry
from sluice.engine.scaling import Decision, QueueObservation, decide, lane_ceiling
from sluice.engine.shardstate import ShardRead, ShardStateReader
from sluice.engine.store import ShardAddress
from sluice.models import Queue, Shard

log = logging.getLogger(__name__)

RETIRED_KEPT = 16  # retired shards kept in the map for lineage; older ones are dropped
# The SSM mirror is checked against the control item this often (and whenever the pass finds its HEADs
# naming an older map than the item's): a read per queue on the quota containers share.
MIRROR_CHECK_EVERY_MS = 600_000
FIGURES_FRESH_MS = 300_000  # another region's last pass counts in the all-regions figures this long
FAST_PERIOD_S = 1.0  # between passes while shards throttle: rates over a second, new shards at once


class Coordinator:
    """Runs passes over the parts it needs: the backend's tables, the queue registry, and an invoker
    that starts push workers and shard work (None: nothing is started)."""

    def __init__(
        self,
        backend: Backend,
        queues: QueueRegistry,
        invoker: Invoker | None = None,
        config: CoordinatorConfig | None = None,
        holder: str | None = None,
    ) -> None:
        self.backend = backend
        self.queues = queues
        self.config = config or CoordinatorConfig()
        self.holder = holder or f"coordinator-{uuid.uuid4().hex[:12]}"
        self.region = queues.region  # None: a single-region deployment
        self.home = queues.home_region
        self.ownership = Ownership(
            backend.control,
            keys.COORDINATOR_PK,
            keys.coordinator_ownership_sk(self.config.ownership_sk, self.region),
            self.holder,
            self.config.ownership_ms,
            backend.clock,
        )
        self.shard_states = ShardStateReader(backend.store)
        self.saved = StateStore(backend.control, self.region)
        self.dispatch = Dispatcher(backend, invoker, self.config)
        self._listed: set[str] = set()  # the queue names the pass listed (dead letter queues missing)
        self._pruned_at: int | None = None  # when the SSM path was last listed (None: not read yet)

    # -- entry points --

    def run(self, loop_seconds: float = 0.0, period_s: float | None = None) -> list[RunReport]:
        """Passes for up to `loop_seconds`, every `period_s` (this run only; default: the config's
        tick) while some queue is busy (`QueueReport.busy`), every `FAST_PERIOD_S` after a pass that
        saw throttles. A pass that finds nothing busy ends the run: at rest one short pass per
        scheduled run, and a throttled broker wakes the coordinator sooner (sluice/engine/wake.py).
        The ownership is released at the end."""
        period = self.config.period_s if period_s is None else period_s
        clock = self.backend.clock
        reports: list[RunReport] = []
        deadline = clock.monotonic() + loop_seconds
        try:
            while True:
                started = clock.monotonic()
                report = self.run_once()
                reports.append(report)
                left = deadline - clock.monotonic()
                if left <= 0 or not report.acted or not report.busy:
                    break
                wake.touch(self.backend, self.region, clock())  # running: no one wakes it
                pause = min(period, FAST_PERIOD_S) if report.throttled else period
                clock.sleep(min(left, max(0.0, pause - (clock.monotonic() - started))))
        finally:
            if reports and reports[-1].acted:
                wake.touch(self.backend, self.region, 0)  # stopped: the next throttle wakes it at once
            self.ownership.release()
        return reports

    def run_once(self) -> RunReport:
        if not self.ownership.acquire():
            seen = self.ownership.seen
            message = (
                f"coordinator {self.holder} stands down: the pass is owned by {seen.get(keys.OWNER_HOLDER)} "
                f"(token {seen.get(keys.OWNER_TOKEN)}) until {seen.get(keys.OWNER_EXPIRES_MS)}"
            )
            log.info(message)
            return RunReport(self.holder, acted=False, message=message, region=self.region)
        token = self.ownership.token
        assert token is not None
        report = RunReport(
            self.holder,
            acted=True,
            token=token,
            message=f"owning the pass, token {token}",
            region=self.region,
        )
        names = self._queue_names()
        self._listed = set(names)
        if self.ownership.took_over_expired:
            self._stamp_fence(names, token)
        report.pruned = self._prune()
        for name in names:
            if not self.ownership.valid():
                report.message = f"ownership (token {token}) ran out during the pass; stopping"
                log.warning(report.message)
                break
            try:
                report.queues.append(self.run_queue(name, token))
            except errors.QueueNotFound:
                continue
            except errors.Conflict as exc:
                report.message = f"stood down on queue {name!r}: {exc.message}"
                log.warning("coordinator %s %s", self.holder, report.message)
                self.ownership.token = None
                break
            except Exception:
                # One queue's failure (a map write SSM refused, a throttled call, a bug) must not cost the
                # queues after it their scaling, shard work and push workers: the next pass tries it again.
                log.exception("coordinator %s: the pass over queue %s failed", self.holder, name)
                report.failed.append(name)
        return report

    def _prune(self) -> list[str]:
        """Every `prune_every_ms` (per region, whichever container's turn it is): remove this region's
        mirrors of deleted queues (`QueueRegistry.prune_mirrors`), against every queue there is."""
        now = self.backend.clock()
        key = (keys.COORDINATOR_PK, keys.coordinator_ownership_sk(keys.COORDINATOR_PRUNED_SK, self.region))
        if self._pruned_at is None:
            item = self.backend.control.get(*key) or {}
            self._pruned_at = int(item.get(keys.PRUNED_AT, 0))
        if 0 <= now - self._pruned_at < self.config.prune_every_ms:
            return []
        self._pruned_at = now
        try:
            self.backend.control.put({keys.PK: key[0], keys.SK: key[1], keys.PRUNED_AT: now})
            return self.queues.prune_mirrors(set(self._queue_names(every=True)))
        except Exception:
            log.exception("coordinator %s: pruning the SSM mirrors failed", self.holder)
            return []

    # -- per queue --

    def run_queue(self, name: str, token: int) -> QueueReport:
        queue = self.queues.get(name)
        self._ensure_dead_letter_queue(queue)
        serves_here = self.region in self.queues.regions_for(queue.settings)
        if serves_here and not [s for s in self._mine(queue) if s.state == "open"]:
            queue = self._add_region_shards(queue, token)
        now = self.backend.clock()
        readable = [s for s in self._mine(queue) if s.state != "retired"]
        # A HEAD read throttled on every retry must not fail the pass: it is the signal to scale up.
        reads, unread = self.shard_states.read_available(queue, readable, sorted(queue.groups))
        saved = self.saved.load(queue)
        mirror_checked_at = saved.mirror_checked_at
        if now - mirror_checked_at >= MIRROR_CHECK_EVERY_MS:
            self.queues.repair_mirror(queue)  # an SSM read: once a minute, not every tick
            mirror_checked_at = now
        dt = (now - saved.at) / 1000 if saved.at else 0.0

        shard_obs = []
        for read in reads:
            drained = read.drained(queue.groups)
            flushed = True
            if read.shard.state == "sealed" and drained and queue.settings.bottomless:
                flushed = observe.shard_is_flushed(self.backend.control, queue, read.shard, read.head.next)
            before = saved.counts.get(str(read.shard.id), [0] * len(read.head.counters))
            shard_obs.append(observe.shard_observation(read, before, dt, drained, flushed))
        shard_obs += [observe.unreadable_observation(shard) for shard in unread]
        obs = QueueObservation(
            name=queue.name,
            min_shards=queue.settings.min_shards,
            max_shards=queue.settings.max_shards,
            shards=shard_obs,
            now_ms=now,
            ordered=queue.settings.ordered,
            low_since_ms=saved.low_since_ms,
        )
        decision = decide(obs, self.config.policy) if dt > 0 else _first_pass(obs)
        report = QueueReport(queue=queue.name, region=self.region, reason=decision.reason)
        report.writes_per_s = sum(s.messages_per_s for s in shard_obs)
        open_now = sum(1 for s in shard_obs if s.state == "open")
        report.utilization = decision.demand_wcu_per_s / (
            max(1, open_now) * self.config.policy.shard_wcu_ceiling
        )
        report.throttles_per_s = sum(s.throttles_per_s for s in shard_obs)
        report.unreadable = [s.id for s in unread]
        report.backlog = observe.backlog(queue, reads)
        report.oldest_message_age_s = observe.oldest_age_s(self.backend, queue, reads, now)
        if not queue.settings.ordered:  # a key's order needs one lane
            report.lane_ceilings = self._raise_lane_ceilings(reads, now)

        if decision.changes_map:
            queue = self._apply(queue, decision, token, report)  # stamps this region's HEADs too
        elif self._stamp_lagging(queue, reads):
            mirror_checked_at = now
        self._seal_heads(queue, reads, unread)
        cadence = dict(saved.cadence)
        work = self.dispatch.plan_shard_work(queue, reads, cadence, now)  # marks its cadence
        report.open_shards = sum(1 for s in self._mine(queue) if s.state == "open")
        report.sealed_shards = sum(1 for s in self._mine(queue) if s.state == "sealed")
        self.saved.save(
            queue,
            SavedState(
                at=now,
                counts=observe.counts_to_keep(saved.counts, reads, unread),
                low_since_ms=decision.low_since_ms,
                mirror_checked_at=mirror_checked_at,
                cadence=cadence,
                figures=report.figures() if self.region else None,
            ),
        )
        if self.region is not None and self.region == self.home:
            report.all_regions = self._all_regions(queue, report, now)
        report.push_workers_started = self.dispatch.start_push_workers(queue, report.backlog, now)
        report.shard_work = [event.to_payload() for event in work]
        self.dispatch.send_shard_work(report.shard_work)
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

    def _raise_lane_ceilings(self, reads: list[ShardRead], now: int) -> dict[str, int]:
        """Consumer pressure (`scaling.lane_ceiling`): more lanes for a group on a shard whose pullers
        keep every lane busy at the ceiling while the backlog would feed more; one conditional update
        of the group's lane 0 each. Messages stay where they are: only consumer parallelism grows."""
        raised = {}
        for read in reads:
            for group, lanes in read.groups.items():
                seen = observe.lane_observation(read, lanes, now, self.config.policy.lane_busy_ms)
                if seen is None or lanes.cursor is None:
                    continue
                ceiling = lane_ceiling(seen, self.config.policy)
                if ceiling > seen.ceiling and self.backend.store.set_ceiling(
                    read.address, group, ceiling, lanes.cursor
                ):
                    raised[f"{read.shard.id}/{group}"] = ceiling
        return raised

    def _apply(self, queue: Queue, decision: Decision, token: int, report: QueueReport) -> Queue:
        """The new map first, with the fencing token; HEAD seals follow (`_seal_heads`). Only this
        region's shards change (another region's coordinator owns the rest of the map)."""
        now = self.backend.clock()
        tables = len(self.backend.shard_tables)

        def change(current: Queue) -> Queue:
            mine = {s.id for s in self._mine(current)}
            shards = [s.model_copy() for s in current.shards]
            open_ids = [s.id for s in shards if s.state == "open" and s.id in mine]
            for shard in shards:
                if shard.id not in mine:
                    continue
                if shard.id in decision.seal and shard.state == "open" and len(open_ids) > 1:
                    shard.state = "sealed"
                    open_ids.remove(shard.id)
                elif shard.id in decision.retire and shard.state == "sealed":
                    shard.state = "retired"
            retired = [s for s in shards if s.state == "retired" and s.id in mine]
            drop = {s.id for s in retired[: max(0, len(retired) - RETIRED_KEPT)]}
            shards = [s for s in shards if s.id not in drop]
            updated = current.model_copy(update={"shards": shards})
            return updated.with_new_shards(decision.add, self.region, tables, now)

        before = {s.id: s.state for s in self._mine(queue)}
        updated = self.queues.modify(queue.name, change, fence=token)
        after = {s.id: s.state for s in self._mine(updated)}
        report.added = [sid for sid in after if sid not in before]
        report.sealed = [sid for sid, st in after.items() if st == "sealed" and before.get(sid) == "open"]
        report.retired = [sid for sid, st in after.items() if st == "retired" and before.get(sid) == "sealed"]
        return updated

    def _stamp_lagging(self, queue: Queue, reads: list[ShardRead]) -> bool:
        """Stamp the HEADs of this region that do not name the current map: a change made in another
        region (which stamps its own only), a stamp that was throttled, a HEAD made after the stamp.
        When no HEAD here names this version yet, the change was made elsewhere and this region's
        mirror may lag too: it is checked first (True: it was)."""
        version = queue.version
        heads = [r for r in reads if r.head.exists]
        if all(r.head.map_version >= version for r in heads):
            return False
        checked = False
        if max(r.head.map_version for r in heads) < version:
            self.queues.repair_mirror(queue)
            checked = True
        self.queues.stamp_heads(queue, [self.region], {r.shard.id: r.head for r in heads})
        return checked

    def _seal_heads(self, queue: Queue, reads: list[ShardRead], unread: list[Shard]) -> None:
        """Every shard the map says is sealed gets `sealed` on its HEAD (idempotent: also repairs a pass
        that died between the map write and this step). A sealed shard whose HEAD could not be read is
        left to the next pass's repair."""
        head_sealed = {r.shard.id for r in reads if r.head.sealed}
        unread_sealed = {s.id for s in unread if s.state == "sealed"}  # sealed before this pass
        now = self.backend.clock()
        for shard in self._mine(queue):
            if shard.state != "sealed" or shard.id in head_sealed or shard.id in unread_sealed:
                continue
            self.backend.store.seal(ShardAddress.of(queue, shard), now)

    def _all_regions(self, queue: Queue, report: QueueReport, now: int) -> Figures:
        """This pass's figures plus every other region's coordinator's last ones (read from its saved
        state, home-local); a region whose last pass is older than `FIGURES_FRESH_MS` is left out."""
        parts = [report.figures()]
        for region in self.queues.regions:
            if region is None or region == self.region:
                continue
            other = self.saved.in_region(region).load(queue)
            if other.figures is not None and other.at is not None and now - other.at <= FIGURES_FRESH_MS:
                parts.append(other.figures)
        return Figures.total(parts)

    def _mine(self, queue: Queue) -> list[Shard]:
        """This region's shards of `queue` (every shard in a single-region deployment)."""
        return queue.shards_in(self.region, self.home)

    def _add_region_shards(self, queue: Queue, token: int) -> Queue:
        """`min_shards` open shards in this region for a queue that has none open here (a region added
        to the deployment after the queue was made), with the fencing token like any map change."""

        def change(current: Queue) -> Queue:
            if any(s.state == "open" for s in self._mine(current)):
                return current
            count, tables = current.settings.min_shards, len(self.backend.shard_tables)
            return current.with_new_shards(count, self.region, tables, self.backend.clock())

        updated = self.queues.modify(queue.name, change, fence=token)
        log.info(
            "queue %s: %d shards added in region %s",
            queue.name,
            updated.next_shard_id - queue.next_shard_id,
            self.region,
        )
        return updated

    def _ensure_dead_letter_queue(self, queue: Queue) -> None:
        """The control path's half of dead letters: a dead letter queue deleted since its source was
        configured is created again here (by the home region's coordinator), never by the consumer,
        which keeps the exhausted messages pending meanwhile (`sluice.engine.deadletter`)."""
        dlq = queue.settings.dead_letter_queue
        if dlq and dlq not in self._listed and self.region == self.home:
            self.queues.ensure_dead_letter(dlq, queue.settings)
            self._listed.add(dlq)

    def _queue_names(self, every: bool = False) -> list[str]:
        """The queues a pass covers (`every`: all queues, whatever the config restricts)."""
        if self.config.queues is not None and not every:
            return list(self.config.queues)
        names: list[str] = []
        after: str | None = None
        while True:
            page = [
                item[keys.SK]
                for item in self.backend.control.query(
                    keys.QUEUE_INDEX_PK, sk_from=(after + "\x00") if after else None, limit=1000
                )
            ]
            names += page
            if len(page) < 1000:
                return names
            after = page[-1]

    def _stamp_fence(self, names: list[str], token: int) -> None:
        """After taking over an expired ownership: raise every queue's fence to our token first, so the
        previous owner, if it is still running, fails its next map write."""
        for name in names:
            try:
                queue = self.queues.get(name)
                if queue.fence_of(self.region) < token:
                    self.queues.modify(name, lambda q: q, fence=token)
            except errors.QueueNotFound:
                continue


def _first_pass(obs: QueueObservation) -> Decision:
    """No earlier snapshot: no rates yet, so only retirement (which needs none) is decided."""
    retire = sorted(
        s.id for s in obs.shards if s.state == "sealed" and s.head_sealed and s.drained and s.flushed
    )
    return Decision(retire=retire, low_since_ms=obs.low_since_ms, reason="first pass: measuring rates")
