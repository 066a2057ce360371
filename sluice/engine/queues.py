"""Queues and their shard maps: the control item is the truth, SSM the cached mirror brokers read.

Multi-region (docs/design.md "Multi-region"): the control item is in the home region's table (the
backend's `control`); every change is mirrored to every region's SSM path, and a region whose mirror
could not be written is repaired by its own coordinator.
"""

from __future__ import annotations

import builtins
import logging
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from sluice import errors, faults
from sluice.adapters.dynamo import ConditionFailed
from sluice.adapters.ssm import SsmMirror
from sluice.engine import keys, mapdoc, maproute
from sluice.engine.backend import Backend
from sluice.engine.store import Head, ShardAddress
from sluice.models import QUEUE_ID_RE, Queue, QueueSettings, Shard
from sluice.names import QUEUE, check_queue_name

log = logging.getLogger(__name__)

MirrorReader = Callable[[str], str | None]
"""Queue name → the mirrored queue document (read now), or None when there is none."""


def parse_settings(raw: dict[str, Any] | None, base: QueueSettings | None = None) -> QueueSettings:
    merged = {**(base.model_dump() if base else {}), **(raw or {})}
    try:
        return QueueSettings.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "settings"
        raise errors.InvalidSettings(f"invalid setting {where}: {first['msg']}") from exc


def dead_letter_settings(source: QueueSettings) -> dict[str, Any]:
    """Settings of an auto-created dead letter queue: a message its source accepted (up to the source's
    size limit) must fit, and stay as long as it would have in the source. Delivery settings (delay,
    visibility, retries, ordering) keep their defaults: the DLQ is read by people and redrive."""
    return {
        "max_message_bytes": source.max_message_bytes,
        "retention_seconds": source.retention_seconds,
        "bottomless": source.bottomless,
        "max_shards": source.max_shards,
    }


class QueueRegistry:
    """Create, read, change and delete queues. Every change is a conditional write, then a mirror."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        # Told of every document this process commits (the process's QueueDirectory keeps it).
        self.listeners: list[Callable[[Queue], None]] = []

    @property
    def regions(self) -> list[str | None]:
        """Where a queue has shards: every region of the deployment, or [None] for a single region."""
        settings = self.backend.settings
        return list(settings.regions) if settings.multi_region else [None]

    @property
    def region(self) -> str | None:
        """This process's region as shards and fences name it (None: a single-region deployment)."""
        return self.backend.settings.region if self.backend.settings.multi_region else None

    @property
    def home_region(self) -> str | None:
        return self.backend.settings.home_region if self.backend.settings.multi_region else None

    def regions_for(self, settings: QueueSettings) -> list[str | None]:
        """Where a queue with `settings` has shards: every region, except an ordered queue (and so
        every stream), whose keys all live in the home region: one sequencer per key, which every
        producer finds without a lookup (docs/design.md "Multi-region")."""
        return [self.home_region] if settings.ordered else self.regions

    def create(self, name: str, raw_settings: dict[str, Any] | None = None, **fields: Any) -> Queue:
        """`fields`: further Queue attributes set atomically with the creation (a face's metadata)."""
        check_queue_name(name)
        settings = parse_settings(raw_settings)
        if settings.dead_letter_queue == name:
            raise errors.InvalidSettings("a queue cannot be its own dead_letter_queue")
        now = self.backend.clock()
        queue = Queue(
            name=name, settings=settings, created_ms=now, incarnation=secrets.token_hex(4), **fields
        )
        for region in self.regions_for(settings):  # `min_shards` open shards in every region
            queue = queue.with_new_shards(settings.min_shards, region, len(self.backend.shard_tables), now)
        try:
            self.backend.control.put(self._item(queue), condition=keys.NEW_ITEM)
        except ConditionFailed as exc:
            raise errors.QueueAlreadyExists(f"queue {name!r} already exists") from exc
        self.backend.control.put({keys.PK: keys.QUEUE_INDEX_PK, keys.SK: name, keys.CREATED_MS: now})
        self._index_id(queue)
        self._write_mirrors(queue)
        self._committed(queue)
        if settings.dead_letter_queue:
            self.ensure_dead_letter(settings.dead_letter_queue, settings)
        return queue

    def ensure_dead_letter(self, name: str, source: QueueSettings) -> Queue:
        """The dead letter queue, created when missing with what lets it take every message its
        source takes (size limit, retention, shard ceiling); an existing queue is left as it is."""
        try:
            return self.create(name, dead_letter_settings(source))
        except errors.QueueAlreadyExists:
            return self.get(name)

    def get(self, name: str) -> Queue:
        check_queue_name(name)
        item = self.backend.control.get(keys.queue_pk(name), keys.QUEUE_SK)
        if item is None:
            raise errors.QueueNotFound(f"queue {name!r} not found")
        return Queue.model_validate_json(item[keys.DOC])

    def list(self, *, limit: int = 100, after: str | None = None) -> list[Queue]:
        """Queues in name order after the name `after` (the cursor a previous page returned)."""
        if after is not None and not QUEUE.ok(after):
            raise errors.InvalidOffset("cursor is invalid: pass the cursor a previous page returned")
        names = [
            item[keys.SK]
            for item in self.backend.control.query(
                keys.QUEUE_INDEX_PK, sk_from=(after + "\x00") if after else None, limit=limit
            )
        ]
        queues = []
        for name in names:
            try:
                queues.append(self.get(name))
            except errors.QueueNotFound:
                continue  # deleted between the index read and the get
        return queues

    def update_settings(self, name: str, raw_settings: dict[str, Any]) -> Queue:
        def change(queue: Queue) -> Queue:
            settings = parse_settings(raw_settings, queue.settings)
            if settings.dead_letter_queue == name:
                raise errors.InvalidSettings("a queue cannot be its own dead_letter_queue")
            return queue.model_copy(update={"settings": settings})

        queue = self.modify(name, change)
        if queue.settings.dead_letter_queue:
            self.ensure_dead_letter(queue.settings.dead_letter_queue, queue.settings)
        return queue

    def set_paused(self, name: str, paused: bool) -> Queue:
        return self.modify(name, lambda q: q.model_copy(update={"paused": paused}))

    def delete(self, name: str) -> None:
        queue = self.get(name)
        try:
            self.backend.control.delete(
                keys.queue_pk(name),
                keys.QUEUE_SK,
                condition="incarnation = :i",
                values={":i": queue.incarnation},
            )
        except ConditionFailed as exc:
            raise errors.QueueNotFound(f"queue {name!r} not found") from exc
        self.backend.control.delete(keys.QUEUE_INDEX_PK, name)
        self.backend.control.delete(keys.queue_id_pk(queue.queue_id), keys.QUEUE_ID_SK)
        # the home item is gone: that is the truth, a remote mirror left behind is only logged (and
        # pruned by that region's coordinator, `prune_mirrors`)
        self._to_every_mirror(name, lambda mirror: mirror.delete(name), "deleted")
        for region in self.regions:
            self.seal_heads(queue, region)

    def stamp_heads(
        self,
        queue: Queue,
        regions: Sequence[str | None] | None = None,
        known: Mapping[int, Head] | None = None,
    ) -> int:
        """Stamp the open and sealed HEAD items of `regions` (default: this process's) with `queue`'s
        version and each region's route (sluice/engine/maproute.py): every container that allocates on
        one, or reads it, learns of the change (a HEAD nobody has written yet is made, so the first send
        there learns too). With `known` (HEADs a pass just read), only those that lag. A throttled HEAD
        is left to the next pass; a region that fails is logged and left to its coordinator. Returns
        how many were stamped."""
        home, tables = self.home_region, len(self.backend.shard_tables)
        stamped = 0
        for region in [self.region] if regions is None else regions:
            stamp = maproute.route(queue, region, tables, home)
            self._stamp_route(queue, region, stamp)
            for shard in queue.shards_in(region, home):
                if shard.state == "retired":
                    continue
                if known is not None:
                    head = known.get(shard.id)
                    if head is None or (head.map_version >= queue.version and head.map_route == stamp):
                        continue
                try:
                    if not self.backend.store.stamp_map(ShardAddress.of(queue, shard), queue.version, stamp):
                        continue  # it names this version or a newer one already
                except errors.Throttled:
                    continue  # a hot HEAD: the next pass stamps it, meanwhile the route item tells
                except Exception as exc:  # committed already: the coordinator of `region` stamps the rest
                    log.warning("queue %s: HEAD items in %s were not stamped: %s", queue.name, region, exc)
                    break
                stamped += 1
        return stamped

    def _stamp_route(self, queue: Queue, region: str | None, stamp: str) -> None:
        """The region's stamp next to the document (`keys.route_sk`): a broker whose every shard is
        throttled reads it there, its HEADs being out of reach (`Publisher._peek`)."""
        try:
            self.backend.control.put(
                {
                    keys.PK: keys.queue_pk(queue.name),
                    keys.SK: keys.route_sk(region),
                    keys.HEAD_MAP_VERSION: queue.version,
                    keys.HEAD_MAP_ROUTE: stamp,
                    "incarnation": queue.incarnation,
                },
                condition="attribute_not_exists(#mv) OR #mv < :v OR incarnation <> :i",
                names={"#mv": keys.HEAD_MAP_VERSION},
                values={":v": queue.version, ":i": queue.incarnation},
            )
        except ConditionFailed:
            pass  # a newer one is there
        except Exception as exc:  # as for the HEADs: the coordinator's next pass writes it
            log.warning("queue %s: the route of %s was not written: %s", queue.name, region, exc)

    def route_of(self, name: str, region: str | None) -> dict[str, Any] | None:
        """The region's stamp (`_stamp_route`) from this region's replica of the control table."""
        return self.backend.local_control.get(keys.queue_pk(name), keys.route_sk(region), consistent=False)

    def _committed(self, queue: Queue) -> None:
        for listener in self.listeners:
            listener(queue)

    def seal_heads(self, queue: Queue, region: str | None) -> int:
        """Seal the HEAD of every shard of `queue` in `region` (None: the only one): a deleted queue's
        shards then refuse every send, also from a container whose cached document still lists them
        (it refreshes, and finds the queue gone). A region that cannot be reached is logged and left to
        its coordinator (`prune_mirrors`). Returns how many were sealed."""
        home = self.home_region
        sealed = 0
        for shard in queue.shards_in(region, home):
            try:
                self.backend.store.seal(ShardAddress.of(queue, shard), self.backend.clock())
            except Exception as exc:  # as for mirrors: the delete is committed, the rest is repair
                log.warning("queue %s: shards in %s were not sealed: %s", queue.name, region, exc)
                break
            sealed += 1
        return sealed

    def prune_mirrors(self, existing: set[str]) -> builtins.list[str]:
        """Delete this region's mirror of every queue that no longer exists (`existing`: the queues the
        caller just listed), after sealing the queue's shards here. A region that could not be reached
        when a queue was deleted keeps its mirror, and its brokers would go on sending into the old
        shards; its coordinator calls this when it lists the SSM path. Returns the queues pruned."""
        mirror = self.backend.mirror
        names: dict[str, set[str]] = {}
        for name, _value in mirror.listing():
            queue_name = mirror.queue_of(name)
            if queue_name is not None and queue_name not in existing:
                names.setdefault(queue_name, set()).add(name)
        pruned = []
        for queue_name, found in sorted(names.items()):
            if self.backend.control.get(keys.queue_pk(queue_name), keys.QUEUE_SK) is not None:
                continue  # created since the caller listed the queues
            doc = mirror.read(queue_name)
            if doc is not None:
                self.seal_heads(mapdoc.decode(doc), self.region)
            mirror.delete_names(sorted(found))
            log.warning("queue %s: deleted, but its mirror lingered in this region; pruned", queue_name)
            pruned.append(queue_name)
        return pruned

    def resolve(self, ref: str) -> str:
        """The queue name for `ref`, a name or a 32-hex `queue_id` (Cloudflare addresses queues by id).
        A queue named like an id wins; an id nobody has comes back unchanged (then: not found)."""
        if not QUEUE_ID_RE.match(ref or ""):
            return ref
        if self.backend.control.get(keys.queue_pk(ref), keys.QUEUE_SK) is not None:
            return ref
        item = self.backend.control.get(keys.queue_id_pk(ref), keys.QUEUE_ID_SK)
        if item is not None:
            return str(item[keys.QUEUE_NAME])
        return self._find_unindexed(ref) or ref

    def _find_unindexed(self, queue_id: str) -> str | None:
        """Queues created before ids were indexed: found by a scan (O(queues) reads, only for an id
        that is not indexed), then indexed so the next lookup is one read."""
        after = None
        while page := self.list(limit=100, after=after):
            for queue in page:
                if queue.queue_id == queue_id:
                    self._index_id(queue)
                    return queue.name
            after = page[-1].name
        return None

    def _index_id(self, queue: Queue) -> None:
        self.backend.control.put(
            {
                keys.PK: keys.queue_id_pk(queue.queue_id),
                keys.SK: keys.QUEUE_ID_SK,
                keys.QUEUE_NAME: queue.name,
            }
        )

    def modify(self, name: str, change: Callable[[Queue], Queue], *, fence: int | None = None) -> Queue:
        """Read-change-write with the version as the condition; retried when a concurrent change won.

        With `fence` (a coordinator's fencing token) the write also fails once a newer coordinator of
        this process's region has written this queue: `errors.Conflict` then tells the stale
        coordinator to stand down. Each region's coordinator has its own token (`Queue.fence_of`).
        """
        region = self.region
        for attempt in range(8):
            current = self.get(name)
            updated = change(current)
            if fence is not None and fence < current.fence_of(region):
                raise errors.Conflict(f"fencing token {fence} is older than {current.fence_of(region)}")
            updated = updated.model_copy(update={"version": current.version + 1})
            if fence is not None:
                updated = updated.with_fence(region, max(current.fence_of(region), fence))
            condition = "#v = :v"
            names = {"#v": keys.QUEUE_VERSION}
            values: dict[str, Any] = {":v": current.version}
            if fence is not None:  # an item no coordinator of this region has fenced yet has no attribute
                condition += " AND (attribute_not_exists(#f) OR #f <= :f)"
                names["#f"] = keys.fence_attribute(region)
                values[":f"] = fence
            try:
                self.backend.control.put(self._item(updated), condition=condition, names=names, values=values)
            except ConditionFailed:
                self.backend.clock.sleep(0.01 * (attempt + 1))
                continue
            if fence is not None:
                faults.crash_point(faults.COORDINATOR_AFTER_MAP_WRITE)
            self._write_mirrors(updated)
            # A coordinator changes its own region's shards (and stamps the rest of its region on every
            # pass); any other change (settings, pause, groups) is stamped in every region at once.
            self.stamp_heads(updated, [region] if fence is not None else self.regions)
            self._committed(updated)
            return updated
        raise errors.Conflict(f"queue {name!r} is being changed concurrently; retry")

    def repair_mirror(self, queue: Queue) -> bool:
        """Rewrite this region's SSM mirror when it lags the control item (a writer died between the two,
        or could not reach this region), or holds an earlier queue of the same name (deleted and created
        again meanwhile). Brokers would otherwise keep an old map until the next change; True when it was
        repaired (False also when SSM throttles the check: the next one tries again)."""
        try:
            doc = self.backend.mirror.read(queue.name)
        except errors.Throttled:
            return False
        if doc is not None:
            mirrored = mapdoc.decode(doc)
            if mirrored.incarnation == queue.incarnation and mirrored.version >= queue.version:
                return False
            if mirrored.incarnation != queue.incarnation:  # the earlier queue's shards refuse sends here
                self.seal_heads(mirrored, self.region)
        try:
            self.backend.mirror.write(queue.name, self.mirror_document(queue))
        except errors.Throttled:
            return False
        return True

    def mirror_document(self, queue: Queue) -> str:
        """What the SSM mirror holds for `queue` (sluice/engine/mapdoc.py)."""
        return mapdoc.encode(queue, len(self.backend.shard_tables))

    def _write_mirrors(self, queue: Queue) -> None:
        """This region's mirror (a failure is the caller's error, as in a single region), then every
        other region's: one that fails is logged, and that region's coordinator repairs it."""
        doc = self.mirror_document(queue)
        self._to_every_mirror(
            queue.name, lambda mirror: mirror.write(queue.name, doc), f"written (v{queue.version})"
        )

    def _to_every_mirror(self, name: str, action: Callable[[SsmMirror], None], done: str) -> None:
        """`action` on this region's mirror, then on every other region's. The change is committed in
        the control item already and the mirror is a cache: one that SSM throttled (PutParameter has a
        small quota of its own) or could not reach is logged, and that region's coordinator repairs it;
        containers meanwhile read the control item, and learn of map changes from the HEAD stamps. Any
        other failure of this region's mirror (a document SSM refuses) is the caller's error."""
        own, *others = self.backend.mirrors
        try:
            action(own)
        except (errors.Throttled, errors.DependencyUnavailable) as exc:
            log.warning("queue %s: the mirror here was not %s (repaired later): %s", name, done, exc)
        for mirror in others:
            try:
                action(mirror)
            # Not only SluiceError: an AWS error the adapter leaves untranslated (SSM's TooManyUpdates
            # when two regions write one mirror at once, AccessDenied, an unusable region) would
            # otherwise fail a change that is already committed in the home item.
            except Exception as exc:
                log.warning("queue %s: the mirror in %s was not %s: %s", name, mirror.region, done, exc)

    @staticmethod
    def _item(queue: Queue) -> dict[str, Any]:
        return {
            keys.PK: keys.queue_pk(queue.name),
            keys.SK: keys.QUEUE_SK,
            keys.QUEUE_VERSION: queue.version,
            keys.QUEUE_FENCE: queue.fence,
            **{keys.fence_attribute(region): token for region, token in queue.fences.items()},
            "incarnation": queue.incarnation,
            keys.DOC: queue.model_dump_json(),
        }


class QueueDirectory:
    """Hot-path reads of queue documents, kept for the life of the process (a Lambda container).

    A document is read from this region's SSM mirror once (the control item when there is none, or SSM
    throttles). After that only what the data path shows changes it: every allocation returns its HEAD
    item and every pull reads some, and a HEAD stamped with a newer map version (`observe`) either hands
    over the region's new routing (no SSM read) or makes the process read the document again. This
    process's own changes arrive through `QueueRegistry.listeners`. Nothing polls: in steady traffic with
    no map change a container makes no SSM call.
    """

    def __init__(self, registry: QueueRegistry, read_mirror: MirrorReader | None = None) -> None:
        self.registry = registry
        self._read_mirror = read_mirror or registry.backend.mirror.read
        self._lock = threading.Lock()
        self._queues: dict[str, Queue] = {}
        self._adopted: dict[tuple[str, str | None], int] = {}  # (queue, region) → newest stamp adopted
        self.mirror_reads = 0
        registry.listeners.append(self.remember)

    def get(self, name: str) -> Queue:
        check_queue_name(name)
        cached = self._queues.get(name)
        return cached if cached is not None else self._load(name, 0)

    def refresh(self, name: str, known_version: int) -> Queue:
        """A document newer than `known_version`: the mirror, else the authoritative item."""
        cached = self._queues.get(name)
        if cached is not None and cached.version > known_version:
            return cached  # another thread of this process read it already
        return self._load(name, known_version)

    def observe(self, queue: Queue, shard: Shard, head: Mapping[str, Any] | None) -> Queue:
        """The newest document this process knows after seeing `shard`'s HEAD item (`queue` when the
        HEAD says nothing new)."""
        head = head or {}
        return self.observe_stamp(
            queue, shard, int(head.get(keys.HEAD_MAP_VERSION, 0)), str(head.get(keys.HEAD_MAP_ROUTE, ""))
        )

    def observe_stamp(self, queue: Queue, shard: Shard, version: int, stamp: str) -> Queue:
        """As `observe`, from a HEAD's map version and route (`Head.map_version`, `map_route`)."""
        current = self._queues.get(queue.name, queue)
        if version <= current.version:
            return current
        region = shard.region or self.registry.home_region
        if self._adopted.get((queue.name, region), 0) >= version:
            return current
        adopted = maproute.adopt(current, region, stamp, self.registry.home_region)
        if adopted is None:
            return self.refresh(queue.name, current.version)
        with self._lock:
            self._queues[queue.name] = adopted
            self._adopted[(queue.name, region)] = version
        return adopted

    def remember(self, queue: Queue) -> None:
        """Keep `queue` when it is newer than what this process holds (its own committed changes)."""
        with self._lock:
            cached = self._queues.get(queue.name)
            if cached is None or cached.incarnation != queue.incarnation or cached.version < queue.version:
                self._queues[queue.name] = queue

    def forget(self, name: str) -> None:
        with self._lock:
            self._queues.pop(name, None)

    def _load(self, name: str, known_version: int) -> Queue:
        self.mirror_reads += 1
        try:
            doc = self._read_mirror(name)
        except (errors.Throttled, errors.DependencyUnavailable) as exc:
            log.warning("queue %s: SSM mirror not read (%s); reading the control item", name, exc)
            doc = None
        queue = mapdoc.decode(doc) if doc is not None else None
        if queue is None or queue.version <= known_version:
            try:
                queue = self.registry.get(name)
            except errors.QueueNotFound:
                self.forget(name)  # deleted: the next call asks again
                raise
        with self._lock:
            self._queues[name] = queue
        return queue
