"""The Cloudflare Queues face (`/client/v4/accounts/{account_id}/queues/...`): sending, queue and
consumer administration (broker); pull, ack, peek and purge by ref (consumer). Errors: the envelope.
A path's `{queue_id}` may be a queue's 32-hex id: token bindings are checked against its name."""

from __future__ import annotations

from lambdas.common.face import Face
from lambdas.common.runtime import service
from lambdas.faces.cloudflare import consumers, fallback, pull, queues, send
from sluice.constants import CLOUDFLARE, FN_BROKER, FN_CONSUMER


def _queue_name(queue_id: str) -> str:
    return service().queues.resolve(queue_id)


FACE = Face(
    CLOUDFLARE,
    routers={
        # fallback last: only what no other route matched
        FN_BROKER: (send.router, queues.router, consumers.router, fallback.router),
        FN_CONSUMER: (pull.router,),
    },
    queue_of=_queue_name,
)
