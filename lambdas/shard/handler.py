"""The shard function: flush hot records to S3 segments (sealing stale gaps on the way), compact them,
apply retention. Only the coordinator invokes it, with a `sluice.events.ShardWorkEvent` saying which
actions to run on which shards of which queue (the policy is `sluice.engine.workplan`); it does exactly
that. Returns the work report (counts, and per-shard errors that did not stop the others).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.common.observability import event_function, logger
from lambdas.common.runtime import service
from sluice.events import ShardWorkEvent


@event_function
@event_parser(model=ShardWorkEvent)
def lambda_handler(event: ShardWorkEvent, context: LambdaContext) -> dict[str, Any]:
    report = service().shard_worker.run(event.actions, event.queue, event.shards)
    result = asdict(report)
    if report.flushed_records or report.compactions or report.errors:
        logger.info("shard work", extra={"queue": event.queue, "actions": event.actions, **result})
    return result
