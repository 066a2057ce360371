"""The native face (`/v1`): queues and tokens, sending, consumer groups and operations, push consumers
(broker); pull, ack and leases, stream reads, the webhook signing keys (consumer). Errors: the envelope."""

from __future__ import annotations

from lambdas.common.face import Face
from lambdas.faces.native import consumers, operations, pull, queues, records, send, webhooks
from sluice.constants import FN_BROKER, FN_CONSUMER, NATIVE

FACE = Face(
    NATIVE,
    routers={
        FN_BROKER: (queues.router, send.router, operations.router, consumers.router),
        FN_CONSUMER: (pull.router, records.router, webhooks.router),
    },
)
