"""The coordinator's EventBridge schedule, cadence and asynchronous invocation. The shard function has no
trigger of its own: the coordinator invokes it (flush, compaction, retention; gap sealing happens during
flushes) and the consumer function (push delivery) directly.

Every start of the coordinator is asynchronous (the rule, a throttled broker's wake): its
`EventInvokeConfig` allows no retry and a short event age, since a failed or late run is replaced by the
next one anyway and a retried run would overlap it. The same holds for what the coordinator starts
asynchronously (shard work, push workers): each pass starts again what is still needed, so a retry only
repeats it, and an event Lambda held back for hours (up to 6 by default, when the function is throttled)
would start work long decided otherwise. Reserved concurrency is opt-in
(`coordinator_reserved_concurrency`): where the account's concurrency quota is low, long polls must not
take the slot scaling needs.

The rule fires every `COORDINATOR_SCHEDULE_MINUTES` with a `CoordinatorEvent` as its input (built from
the model the handler parses); each run loops every `tick_seconds` for the rule's period minus one tick,
so the coordinator decides every few seconds. `sluice local` reads this rule and these variables back
from the template (`sluice.local.template.schedules_from_template`).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from sluice import constants as c
from sluice.events import CoordinatorEvent


def cadence_environment(
    tick_seconds: float, flush_seconds: float, maintenance_seconds: float
) -> dict[str, str]:
    """The coordinator's schedule variables (`constants.SCHEDULE_ENV`), read by `CoordinatorSettings`."""
    period = c.COORDINATOR_SCHEDULE_MINUTES * 60
    return {
        c.ENV_COORDINATOR_PERIOD_SECONDS: f"{tick_seconds:g}",
        c.ENV_COORDINATOR_LOOP_SECONDS: f"{period - tick_seconds:g}",
        c.ENV_SHARD_FLUSH_SECONDS: f"{flush_seconds:g}",
        c.ENV_SHARD_MAINTENANCE_SECONDS: f"{maintenance_seconds:g}",
    }


class CoordinatorSchedule(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        coordinator: lambda_.Function,
        started_by_coordinator: Sequence[lambda_.IFunction],
        tick_seconds: float = c.DEFAULT_COORDINATOR_TICK_SECONDS,
        flush_seconds: float = c.DEFAULT_SHARD_FLUSH_SECONDS,
        maintenance_seconds: float = c.DEFAULT_SHARD_MAINTENANCE_SECONDS,
    ) -> None:
        super().__init__(scope, construct_id)
        # Lambda retries a failed async run twice by default. The next minute's (or wake's) run replaces a
        # coordinator run, and the coordinator's next pass starts again the shard work and push workers
        # still needed.
        for function in (coordinator, *started_by_coordinator):
            function.configure_async_invoke(
                retry_attempts=0, max_event_age=Duration.seconds(c.ASYNC_MAX_EVENT_AGE_SECONDS)
            )
        for name, value in cadence_environment(tick_seconds, flush_seconds, maintenance_seconds).items():
            coordinator.add_environment(name, value)
        self.rule = events.Rule(
            self,
            "Rule",
            rule_name=f"sluice-{stage}-coordinator",
            description="Runs the Sluice coordinator (scaling, sealing, shard-map publish, shard work)",
            schedule=events.Schedule.rate(Duration.minutes(c.COORDINATOR_SCHEDULE_MINUTES)),
            # A missed tick is harmless (the next one catches up); retrying would overlap the next run.
            targets=[
                targets.LambdaFunction(
                    coordinator,
                    event=events.RuleTargetInput.from_object(CoordinatorEvent().to_payload()),
                    retry_attempts=0,
                    max_event_age=Duration.seconds(c.ASYNC_MAX_EVENT_AGE_SECONDS),
                )
            ],
        )
