"""The shard function: flush hot records to S3 segments, compact them, apply retention, sweep
expired items (local runtime), seal gaps. Invoked by the coordinator or a schedule (deployed) and
by a timer (`sluice local`).

Event: `{"action": "flush" | "compact" | "sweep" | "retention" | "all", "queue": "<name>"}`; both
optional (`all`, every queue). A scheduled EventBridge event carries neither, so it means `all`.
Returns the work report (counts, and per-shard errors that did not stop the others).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.common.runtime import service

logger = Logger()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    event = event or {}
    report = service().shard_worker.run(event.get("action") or "all", event.get("queue"))
    result = asdict(report)
    if report.flushed_records or report.compactions or report.errors:
        logger.info("shard work", extra=result)
    return result
