"""The registered HTTP pull consumer of a queue (Cloudflare's `http_pull` consumer type).

Pulls work on every queue whether or not one is registered; the record keeps what Cloudflare's
consumer API reports and Sluice's queue settings do not hold: its id, creation time and preferred
batch size. Its retry, lease and dead-letter settings are the queue's own settings.
"""

from __future__ import annotations

from pydantic import BaseModel

from sluice import errors
from sluice.adapters.dynamo import ConditionFailed
from sluice.engine import keys
from sluice.engine.backend import Backend
from sluice.models import Queue


class PullConsumer(BaseModel):
    consumer_id: str
    created_ms: int
    batch_size: int | None = None


class PullConsumers:
    """One item per queue (`Q#<queue>` / `PULLCONSUMER`), scoped to the queue's incarnation."""

    def __init__(self, backend: Backend) -> None:
        self.table = backend.control

    def put(self, queue: Queue, consumer: PullConsumer, *, new: bool) -> PullConsumer:
        """Register (`new`: refused when one exists) or overwrite the queue's pull consumer."""
        inc = {":inc": queue.incarnation}
        condition = f"{keys.NEW_ITEM} OR {keys.INCARNATION} <> :inc" if new else f"{keys.INCARNATION} = :inc"
        try:
            self.table.put(
                {
                    keys.PK: keys.queue_pk(queue.name),
                    keys.SK: keys.PULL_CONSUMER_SK,
                    keys.INCARNATION: queue.incarnation,
                    keys.DOC: consumer.model_dump_json(),
                },
                condition=condition,
                values=inc,
            )
        except ConditionFailed as exc:
            if new:
                raise errors.ConsumerAlreadyExists(
                    f"queue {queue.name!r} already has an http_pull consumer"
                ) from exc
            raise errors.ConsumerNotFound(f"queue {queue.name!r} has no http_pull consumer") from exc
        return consumer

    def get(self, queue: Queue) -> PullConsumer | None:
        item = self.table.get(keys.queue_pk(queue.name), keys.PULL_CONSUMER_SK)
        if not item or item.get(keys.INCARNATION) != queue.incarnation:
            return None
        return PullConsumer.model_validate_json(item[keys.DOC])

    def delete(self, queue: Queue) -> None:
        try:
            self.table.delete(
                keys.queue_pk(queue.name),
                keys.PULL_CONSUMER_SK,
                condition=f"{keys.INCARNATION} = :inc",
                values={":inc": queue.incarnation},
            )
        except ConditionFailed as exc:
            raise errors.ConsumerNotFound(f"queue {queue.name!r} has no http_pull consumer") from exc
