"""What the Cloudflare Queues face's handlers share: result shapes, queue resolution.

Cloudflare's REST paths are `/client/v4/accounts/{account_id}/queues/{queue_id}/...`; `account_id`
is accepted and ignored, `queue_id` is the queue's 32-hex id or its name. Result shapes are the union
of what the two SDK generations (cloudflare 4.x and 5.x) model, so each validates against either.
Where they contradict each other (ack `warnings`), `warnings_as_list` picks the caller's generation.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from lambdas.common.runtime import service
from lambdas.faces.cloudflare.pullconsumers import PullConsumer, PullConsumers
from sluice.engine.publish import message_id
from sluice.engine.push import ConsumerStore, PushConsumer
from sluice.models import (
    DEFAULT_GROUP,
    Queue,
)

CF_QUEUES = "/client/v4/accounts/<account_id>/queues"
CF_Q = f"{CF_QUEUES}/<queue_id>"
# Sent by the official SDKs (Stainless-generated): the SDK's language and its own version number.
SDK_LANG_HEADER = "x-stainless-lang"
SDK_VERSION_HEADER = "x-stainless-package-version"
# The first major version, per SDK language, that models ack `warnings` as Cloudflare's current API answers
# (a map of lease id → warning); earlier ones model a list of strings. Each SDK numbers its own releases:
# PyPI `cloudflare` 4.x lists, 5.x maps; npm `cloudflare` 4.x and 5.x list, 6.x and later map.
WARNINGS_MAP_SINCE = {"python": 5, "js": 6}


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def queue_name(queue_id: str) -> str:
    """The queue's name for a path's `{queue_id}` (an id or a name)."""
    return service().queues.resolve(queue_id)


def warnings_as_list(headers: dict[str, str] | None) -> bool:
    """Whether the official SDK that sent the request models ack `warnings` as a list: decided by its
    language and its major version together (`WARNINGS_MAP_SINCE`). Anything else (curl, wrangler, an SDK
    that does not say, a language not listed) gets the current API's map."""
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    since = WARNINGS_MAP_SINCE.get(lowered.get(SDK_LANG_HEADER, "").strip().lower())
    head = lowered.get(SDK_VERSION_HEADER, "").split(".", 1)[0]
    return since is not None and head.isdigit() and int(head) < since


def ack_warnings(name: str, warnings: list[str], lease_ids: list[str], as_list: bool) -> Any:
    """Cloudflare's current API answers a map of lease id → warning; older SDK generations model a list
    of strings (`warnings_as_list`), and get the list. A warning names its lease or its message."""
    if as_list:
        return warnings
    engine = service()
    queue = engine.directory.get(name)
    labels: dict[str, str] = {}
    for lease_id in lease_ids:
        labels[lease_id] = lease_id
        lease = engine.consumer.signer.verify(queue.lease_key, lease_id)
        if lease is not None:
            labels[message_id(queue, lease.shard, lease.seq)] = lease_id
    by_lease: dict[str, str] = {}
    for text in warnings:
        named = next((lid for label, lid in labels.items() if label in text), f"warning-{len(by_lease)}")
        by_lease[named] = text
    return by_lease


def metrics_of(name: str) -> dict[str, int]:
    """Cloudflare's best-effort queue metrics, for the `default` group (the one Cloudflare pulls use)."""
    figures = service().operations.metrics(name, groups=[DEFAULT_GROUP])
    return {k: figures[k] for k in ("backlog_count", "backlog_bytes", "oldest_message_timestamp_ms")}


def cf_consumers(queue: Queue) -> list[dict[str, Any]]:
    backend = service().backend
    out = [push_shape(queue, c) for c in ConsumerStore(backend).list(queue)]
    pull = PullConsumers(backend).get(queue)
    return ([pull_shape(queue, pull)] if pull else []) + out


def queue_shape(queue: Queue, *, with_consumers: bool = True) -> dict[str, Any]:
    consumers = cf_consumers(queue) if with_consumers else []
    return {
        "queue_id": queue.queue_id,
        "queue_name": queue.name,
        "created_on": iso(queue.created_ms),
        "producers": [],
        "producers_total_count": 0,
        "consumers": consumers,
        "consumers_total_count": len(consumers),
        "settings": {
            "delivery_delay": queue.settings.delivery_delay_seconds,
            "delivery_paused": queue.paused,
            "message_retention_period": queue.settings.retention_seconds,
        },
    }


def _common(queue: Queue, consumer_id: str, created_ms: int) -> dict[str, Any]:
    return {
        "consumer_id": consumer_id,
        "created_on": iso(created_ms),
        "queue_id": queue.queue_id,
        "queue_name": queue.name,
        "dead_letter_queue": queue.settings.dead_letter_queue or "",
    }


def pull_shape(queue: Queue, consumer: PullConsumer) -> dict[str, Any]:
    s = queue.settings
    return {
        **_common(queue, consumer.consumer_id, consumer.created_ms),
        "type": "http_pull",
        "settings": {
            "batch_size": consumer.batch_size or 5,
            "max_retries": s.max_retries,
            "retry_delay": s.retry_delay_seconds,
            "visibility_timeout_ms": s.visibility_timeout_ms,
        },
    }


def push_shape(queue: Queue, consumer: PushConsumer) -> dict[str, Any]:
    target = consumer.function_arn or consumer.url or ""
    return {
        **_common(queue, consumer.id, consumer.created_ms),
        "type": "worker",
        "script": target,  # SDK 4.x's name for it
        "script_name": target,
        "settings": {
            "batch_size": consumer.max_batch_size,
            "max_concurrency": consumer.max_concurrency,
            "max_retries": consumer.max_retries,
            "max_wait_time_ms": consumer.max_batch_timeout_ms,
            "retry_delay": consumer.retry_delay_seconds,
        },
    }
