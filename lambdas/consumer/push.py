"""Push delivery: the coordinator starts this function with `{"push": {"queue", "consumer_id", "slot"}}`."""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger

from lambdas.common.runtime import service
from sluice import constants as c
from sluice.adapters.targets import target_for
from sluice.engine.push import run_worker

logger = Logger(child=True)


def handle(spec: dict[str, Any], context: Any) -> dict[str, Any]:
    allow_local = os.environ.get(c.ENV_ALLOW_LOCAL_WEBHOOKS) == "1"
    report = run_worker(
        service(),
        str(spec["queue"]),
        str(spec["consumer_id"]),
        int(spec.get("slot", 0)),
        lambda consumer: target_for(consumer, allow_local=allow_local),
        context.get_remaining_time_in_millis,
    )
    logger.info("push worker done", extra=asdict(report))
    return asdict(report)
