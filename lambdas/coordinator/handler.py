"""The coordinator: EventBridge schedule → scaling, sealing, shard-map publish, push workers, shard work.

The schedule fires every `COORDINATOR_SCHEDULE_MINUTES` with a `sluice.events.CoordinatorEvent`; a
broker whose shards throttle sends one too (`woken_by`, sluice/engine/wake.py). A run passes once and
keeps deciding every `SLUICE_COORDINATOR_PERIOD_SECONDS` (the tick, CDK context
`coordinator_tick_seconds`) only while some queue is busy, for at most `SLUICE_COORDINATOR_LOOP_SECONDS`
(the rule's period minus one tick), and always stops `SAFETY_SECONDS` before the function's timeout: at
rest one short pass a minute, under load a decision every tick. The event may override both (manual
invocations). Metrics go out as EMF.
"""

from __future__ import annotations

from dataclasses import asdict
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.common.invoke import LambdaInvoker
from lambdas.common.observability import event_function, logger, metrics
from lambdas.common.runtime import service
from sluice import constants as c
from sluice.engine.coordinator import Coordinator, CoordinatorConfig, RunReport
from sluice.engine.coordinator.reports import Figures, QueueReport
from sluice.events import CoordinatorEvent
from sluice.settings import get_settings

SAFETY_SECONDS = 10.0  # stop looping this long before the function's timeout
REGION_DIMENSION = "region"  # multi-region: the per-queue metrics of one region's shards


@lru_cache(maxsize=1)
def coordinator() -> Coordinator:
    """One per container: the holder id stays the same across invocations of a warm container."""
    settings = get_settings()
    engine = service()
    config = CoordinatorConfig.from_settings(settings.coordinator)
    return Coordinator(engine.backend, engine.queues, LambdaInvoker(settings.lambda_endpoint_url), config)


def emit_metrics(report: RunReport) -> None:
    """Per queue: dimension `queue` (the queue over every region: a single-region deployment's figures,
    or the home region coordinator's all-regions sum) and, multi-region, dimensions `queue` + `region`
    (this coordinator's region's shards). Then this run's totals over its queues with dimension service
    only (its region's: what the stack's alarm in each region watches).

    An idle queue (nothing written, nothing waiting, no throttle, no push worker) emits nothing, nor does
    a run whose queues are all idle: each custom metric is billed for every hour it is emitted in, so an
    idle stack would pay for them by the month (docs/performance.md "Cost at rest"). The stack's alarms
    treat missing data as not breaching, and a dashboard shows a gap, not a zero."""
    if not report.acted:
        return
    active = [q for q in report.queues if not _idle(q)]
    if not active:
        return
    for q in active:
        per_queue = EphemeralMetrics(namespace=c.METRICS_NAMESPACE, service=c.SERVICE_NAME)
        per_queue.add_dimension("queue", q.queue)
        if q.region:
            per_queue.add_dimension(REGION_DIMENSION, q.region)
        _add_figures(per_queue, q.figures())
        per_queue.add_metric(c.METRIC_THROTTLES_PER_SECOND, MetricUnit.CountPerSecond, q.throttles_per_s)
        per_queue.add_metric(c.METRIC_PUSH_WORKERS, MetricUnit.Count, q.push_workers_started)
        per_queue.flush_metrics()
        if q.all_regions is not None:
            total = EphemeralMetrics(namespace=c.METRICS_NAMESPACE, service=c.SERVICE_NAME)
            total.add_dimension("queue", q.queue)
            _add_figures(total, q.all_regions)
            total.flush_metrics()
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


def _idle(q: QueueReport) -> bool:
    busy = q.writes_per_s or q.throttles_per_s or q.total_backlog or q.push_workers_started or q.unreadable
    return not busy and (
        q.all_regions is None or not (q.all_regions.writes_per_s or q.all_regions.total_backlog)
    )


def _add_figures(target: EphemeralMetrics, figures: Figures) -> None:
    """The metrics a queue's `Figures` carry, in one region or over all of them."""
    target.add_metric(c.METRIC_BACKLOG, MetricUnit.Count, figures.total_backlog)
    target.add_metric(c.METRIC_OLDEST_MESSAGE_AGE, MetricUnit.Seconds, figures.oldest_message_age_s)
    target.add_metric(c.METRIC_SHARDS, MetricUnit.Count, figures.open_shards)
    target.add_metric(c.METRIC_WRITES_PER_SECOND, MetricUnit.CountPerSecond, figures.writes_per_s)


def loop_seconds(event: CoordinatorEvent, config: CoordinatorConfig, remaining_ms: int) -> float:
    """How long this run keeps passing: the event's override or the configured loop, ending
    `SAFETY_SECONDS` before the timeout (never negative: one pass at least)."""
    wanted = config.loop_s if event.loop_seconds is None else event.loop_seconds
    return max(0.0, min(wanted, remaining_ms / 1000 - SAFETY_SECONDS))


@metrics.log_metrics
@event_function
@event_parser(model=CoordinatorEvent)
def lambda_handler(event: CoordinatorEvent, context: LambdaContext) -> dict[str, Any]:
    coord = coordinator()
    if event.woken_by:
        logger.info("woken: queue %s saw its shards throttled", event.woken_by)
    loop = loop_seconds(event, coord.config, context.get_remaining_time_in_millis())
    reports = coord.run(loop, period_s=event.period_seconds)
    for report in reports:
        emit_metrics(report)
        if report.acted:
            changed = [q for q in report.queues if q.added or q.sealed or q.retired or q.push_workers_started]
            logger.info(report.message, extra={"queues": [asdict(q) for q in changed]})
        else:
            logger.info(report.message)  # "... stands down: the pass is owned by ..."
    return {
        "holder": coord.holder,
        "passes": len(reports),
        "acted": sum(r.acted for r in reports),
        "stood_down": sum(not r.acted for r in reports),
        "messages": [r.message for r in reports][-3:],
    }
