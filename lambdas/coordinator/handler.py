"""The coordinator: EventBridge schedule → scaling, sealing, shard-map publish, push workers, shard work.

Event (all optional): `{"loop_seconds": 50, "period_seconds": 10}` — keep deciding every period for
that long inside one invocation (finer control than the one-minute schedule); defaults come from
`SLUICE_COORDINATOR_LOOP_SECONDS` / `SLUICE_COORDINATOR_PERIOD_SECONDS`. Metrics go out as EMF.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from functools import lru_cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.common.invoke import LambdaInvoker
from lambdas.common.runtime import service
from sluice import constants as c
from sluice.engine.coordinator import Coordinator, CoordinatorConfig, RunReport

logger = Logger(service=c.SERVICE_NAME)
metrics = Metrics(namespace=c.METRICS_NAMESPACE, service=c.SERVICE_NAME)
copy_config_to_registered_loggers(source_logger=logger, include={"sluice.coordinator"})

SAFETY_SECONDS = 10.0  # stop looping this long before the function's timeout


@lru_cache(maxsize=1)
def coordinator() -> Coordinator:
    """One per container: the holder id stays the same across invocations of a warm container."""
    return Coordinator(service(), LambdaInvoker(), CoordinatorConfig.from_env())


def emit_metrics(report: RunReport) -> None:
    if not report.acted:
        return
    for q in report.queues:
        per_queue = EphemeralMetrics(namespace=c.METRICS_NAMESPACE, service=c.SERVICE_NAME)
        per_queue.add_dimension("queue", q.queue)
        per_queue.add_metric(c.METRIC_BACKLOG, MetricUnit.Count, q.total_backlog)
        per_queue.add_metric(c.METRIC_OLDEST_MESSAGE_AGE, MetricUnit.Seconds, q.oldest_message_age_s)
        per_queue.add_metric(c.METRIC_SHARDS, MetricUnit.Count, q.open_shards)
        per_queue.add_metric(c.METRIC_WRITES_PER_SECOND, MetricUnit.CountPerSecond, q.writes_per_s)
        per_queue.add_metric(c.METRIC_THROTTLES_PER_SECOND, MetricUnit.CountPerSecond, q.throttles_per_s)
        per_queue.add_metric(c.METRIC_PUSH_WORKERS, MetricUnit.Count, q.push_workers_started)
        per_queue.flush_metrics()
    # Over all queues, dimension service only: what the stack's alarm watches.
    queues = report.queues
    metrics.add_metric(
        c.METRIC_OLDEST_MESSAGE_AGE,
        MetricUnit.Seconds,
        max((q.oldest_message_age_s for q in queues), default=0),
    )
    metrics.add_metric(c.METRIC_BACKLOG, MetricUnit.Count, sum(q.total_backlog for q in queues))
    metrics.add_metric(c.METRIC_SHARDS, MetricUnit.Count, sum(q.open_shards for q in queues))
    metrics.add_metric(
        c.METRIC_WRITES_PER_SECOND, MetricUnit.CountPerSecond, sum(q.writes_per_s for q in queues)
    )


@metrics.log_metrics
@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    event = event or {}
    coord = coordinator()
    if event.get("period_seconds") is not None:
        coord.config.period_s = float(event["period_seconds"])
    loop = float(event.get("loop_seconds", os.environ.get(c.ENV_COORDINATOR_LOOP_SECONDS) or 0))
    loop = max(0.0, min(loop, context.get_remaining_time_in_millis() / 1000 - SAFETY_SECONDS))
    reports = coord.run(loop)
    for report in reports:
        emit_metrics(report)
        if report.acted:
            changed = [q for q in report.queues if q.added or q.sealed or q.retired or q.push_workers_started]
            logger.info(report.message, extra={"queues": [asdict(q) for q in changed]})
        else:
            logger.info(report.message)  # "... stands down: the lease is held by ..."
    return {
        "holder": coord.holder,
        "passes": len(reports),
        "acted": sum(r.acted for r in reports),
        "stood_down": sum(not r.acted for r in reports),
        "messages": [r.message for r in reports][-3:],
    }
