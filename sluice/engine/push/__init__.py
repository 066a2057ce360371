"""Push consumers: configs (`config`), worker slots (`slots`), and the worker loop (`worker`).

The coordinator starts workers in proportion to the backlog (`worker_count`); each worker first owns a
numbered slot, so at most `max_concurrency` run at once.
"""

from sluice.engine.push.config import (
    ConsumerStore,
    PushConsumer,
    parse_consumer,
    validate_target,
    worker_count,
)
from sluice.engine.push.slots import WorkerSlots
from sluice.engine.push.worker import PUSH_PAYLOAD_BYTES, Pusher, Target, WorkerReport

__all__ = [
    "PUSH_PAYLOAD_BYTES",
    "ConsumerStore",
    "PushConsumer",
    "Pusher",
    "Target",
    "WorkerReport",
    "WorkerSlots",
    "parse_consumer",
    "validate_target",
    "worker_count",
]
