"""Push delivery: the coordinator starts this function with a `sluice.events.PushWorkerEvent`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.utilities.parser import parse

from lambdas.common.observability import event_function, logger
from lambdas.common.runtime import service
from sluice.adapters.targets import target_for
from sluice.events import PushWorkerEvent
from sluice.settings import get_settings


@event_function
def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    spec = parse(event=event, model=PushWorkerEvent).push
    allow_local = get_settings().allow_local_webhooks
    sluice = service()
    report = sluice.pusher.run(
        spec.queue,
        spec.consumer_id,
        spec.slot,
        lambda consumer: target_for(consumer, allow_local=allow_local, sign=sluice.webhook_signer.headers),
        context.get_remaining_time_in_millis,
    )
    logger.info("push worker done", extra=asdict(report))
    return asdict(report)
