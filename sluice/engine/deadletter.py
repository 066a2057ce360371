"""Dead letters: a message delivered `max_retries` times is published to its queue's dead letter queue
(idempotently enough: at most a duplicate there), then dropped from the group's pending set.

The sink never creates a queue. The dead letter queue is created when the source queue is configured
(`QueueRegistry.create` / `update_settings`); one deleted since is created again by the control path
(the coordinator's pass, `Coordinator._ensure_dead_letter_queues`), never by the consumer, which may
not write shard maps. Until then the exhausted messages stay pending, undelivered, and are tried again
after `RETRY_MS`: nothing is lost and nothing is delivered past its limit.
"""

from __future__ import annotations

from sluice import errors, faults
from sluice.codec import StoredMessage
from sluice.engine.publish import Publisher, request_batches
from sluice.models import OutgoingMessage, Queue

SOURCE_ATTRIBUTE = "sluice-source-queue"  # set on dead-lettered messages, dropped again on redrive
RETRY_MS = 30_000  # a missing dead letter queue is looked for again this much later


class DeadLetterSink:
    def __init__(self, publisher: Publisher) -> None:
        self.publisher = publisher

    def send(self, queue: Queue, messages: list[StoredMessage]) -> bool:
        """Publish `messages` (whole bodies) to the queue's dead letter queue. False when it does not
        exist (the caller keeps them pending); True when they are there, or there is none configured
        (the caller drops them)."""
        dlq = queue.settings.dead_letter_queue
        if not dlq:
            return True
        outgoing = [
            OutgoingMessage(
                body=msg.body,
                content_type=msg.content_type,
                partition_key=msg.partition_key,
                attributes={**msg.attributes, SOURCE_ATTRIBUTE: queue.name},
            )
            for msg in messages
        ]
        try:
            for part in request_batches(outgoing):
                self.publisher.publish(dlq, part)
        except errors.QueueNotFound:
            return False  # deleted since it was configured: the coordinator creates it again
        faults.crash_point(faults.DLQ_AFTER_WRITE)
        return True
