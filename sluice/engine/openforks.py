"""Forks of open Durable Streams protocol streams (PROTOCOL.md 4.2): request values, where a fork
starts and what it inherits, the reference count that keeps a source's data while forks read it, and
soft delete.

A fork copies nothing: its queue document names the source stream and the position (`base`) below
which reads come from the source, level by level up a fork chain. So a source stays readable as
long as a fork refers to it, its shard head carries:

- REFS (`keys.OS_REFS`): how many forks refer to it (added before a fork is created, taken back
  when a fork's queue is deleted);
- GONE (`keys.OS_GONE`): set once when the stream is deleted or dropped as expired. With REFS > 0 the
  stream is only soft-deleted (its queue document and data stay for fork reads; clients get 410 Gone,
  a PUT 409); the write that brings REFS to 0 on a GONE head deletes the queue, and that release cascades up
  the chain.

Both are changed only by conditional writes on the one head item, so a delete and a fork creation
racing on a source are ordered: a fork cannot attach once GONE is set, and exactly one writer sees
the transition to "gone with no forks" and deletes. A process dying between adding a reference and
creating the fork's queue leaves one reference too many: the source is then kept (soft-deleted)
rather than deleted — never the other way round, which could delete data a fork still reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sluice import errors
from sluice.adapters.dynamo import ConditionFailed
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.engine.queues import QueueRegistry
from sluice.models import OpenStreamFork, OpenStreamMeta, Queue


@dataclass(frozen=True)
class ForkRequest:
    """`Stream-Forked-From`, `Stream-Fork-Offset` (None: the source's tail) and `Stream-Fork-Sub-Offset`."""

    source_path: str
    offset: int | None
    sub_offset: int


def fork_point(
    offset: int, sub: int, *, tail: int, json_records: bool, record_at: Callable[[int], bytes | None]
) -> tuple[int, bytes | None]:
    """Where the fork's own records start, and the cut-out head of a binary record to store first.
    A JSON sub-offset counts messages (one record each); a binary one bytes of the record at the
    offset (`record_at`: that record, None if it is not readable). Past the next boundary is refused."""
    if sub == 0:
        return offset, None
    if json_records:
        if offset + sub > tail:
            raise errors.InvalidRequest("Stream-Fork-Sub-Offset is past the source's messages")
        return offset + sub, None
    if offset >= tail:
        raise errors.InvalidRequest("Stream-Fork-Sub-Offset names data past the source's tail")
    record = record_at(offset)
    if record is None:
        raise errors.InvalidRequest("Stream-Fork-Sub-Offset does not name readable data")
    if sub > len(record):
        raise errors.InvalidRequest("Stream-Fork-Sub-Offset is past the end of the data at the offset")
    if sub == len(record):
        return offset + 1, None
    return offset, record[:sub]


def fork_meta(
    meta: OpenStreamMeta,
    request: ForkRequest,
    source: Queue,
    source_meta: OpenStreamMeta,
    *,
    offset: int,
    base: int,
) -> OpenStreamMeta:
    """The fork's metadata: its source's content type, and its TTL/expiry when the request sends
    neither (PROTOCOL.md 4.2); where it forks (`OpenStreamFork`)."""
    inherit = meta.ttl_seconds is None and meta.expires_at is None
    return meta.model_copy(
        update={
            "content_type": source_meta.content_type,
            "ttl_seconds": source_meta.ttl_seconds if inherit else meta.ttl_seconds,
            "expires_at": source_meta.expires_at if inherit else meta.expires_at,
            "expires_at_ms": source_meta.expires_at_ms if inherit else meta.expires_at_ms,
            "fork": OpenStreamFork(
                source_path=request.source_path,
                source_queue=source.name,
                source_incarnation=source.incarnation,
                offset=offset,
                sub_offset=request.sub_offset,
                base=base,
            ),
        }
    )


class Lineage:
    """Reference counts and (soft) deletion of open-protocol streams, forks or not."""

    def __init__(self, backend: Backend, registry: QueueRegistry) -> None:
        self.backend = backend
        self.registry = registry

    def _update(
        self, queue: Queue, expression: str, condition: str, values: dict[str, Any]
    ) -> dict[str, Any]:
        shard = queue.shards[0]
        # the face's head guard is bumped on delete, so a racing append re-reads and sees OS_GONE
        names = {"#r": keys.OS_REFS, "#g": keys.OS_GONE, "#v": keys.OS_GUARD}
        item = self.backend.table_for(shard).update(
            keys.shard_pk(queue, shard.id),
            keys.HEAD_SK,
            expression,
            condition=condition,
            names={k: v for k, v in names.items() if k in expression or k in condition},
            values=values,
            returns="ALL_NEW",
        )
        return item or {}

    def add_ref(self, source: Queue) -> None:
        try:
            self._update(source, "ADD #r :one", "attribute_not_exists(#g)", {":one": 1})
        except ConditionFailed as exc:
            raise errors.Conflict("the source stream was deleted; it is kept only for its forks") from exc

    def release(self, source_queue: str, incarnation: str) -> None:
        """One fork less on the source; a deleted source with no fork left is deleted, up the chain."""
        try:
            source = self.registry.get(source_queue)
        except errors.QueueNotFound:
            return
        if source.incarnation != incarnation:
            return
        try:
            head = self._update(source, "ADD #r :minus", "#r > :zero", {":minus": -1, ":zero": 0})
        except ConditionFailed:
            return  # no reference to give back (released already)
        if head.get(keys.OS_GONE) and int(head.get(keys.OS_REFS, 0)) <= 0:
            self._erase(source)

    def drop(self, queue: Queue) -> None:
        """Delete the stream: soft while forks refer to it, else for good (and release its source)."""
        try:
            head = self._update(
                queue,
                "SET #g = :t, #v = if_not_exists(#v, :zero) + :one",
                "attribute_not_exists(#g)",
                {":t": True, ":zero": 0, ":one": 1},
            )
        except ConditionFailed:
            return  # a concurrent delete got there first
        if int(head.get(keys.OS_REFS, 0)) <= 0:
            self._erase(queue)

    def _erase(self, queue: Queue) -> None:
        with contextlib.suppress(errors.QueueNotFound):  # a concurrent erase got there first
            self.registry.delete(queue.name)
        fork = queue.open_stream.fork if queue.open_stream else None
        if fork is not None:
            self.release(fork.source_queue, fork.source_incarnation)

    def source_of(self, queue: Queue) -> Queue:
        """A fork's source queue (kept by the fork's reference, soft-deleted or expired or not)."""
        fork = queue.open_stream.fork if queue.open_stream else None
        assert fork is not None
        try:
            source = self.registry.get(fork.source_queue)
        except errors.QueueNotFound:
            source = None
        if source is None or source.incarnation != fork.source_incarnation:
            raise errors.DependencyUnavailable("the fork's source data is not available")
        return source
