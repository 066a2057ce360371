"""The coordinator's EventBridge schedule. The shard function has no trigger of its own: the coordinator
invokes it (flush, compaction, gap repair) and the consumer function (push delivery) directly."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from sluice import constants as c


class CoordinatorSchedule(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, stage: str, coordinator: lambda_.IFunction
    ) -> None:
        super().__init__(scope, construct_id)
        self.rule = events.Rule(
            self,
            "Rule",
            rule_name=f"sluice-{stage}-coordinator",
            description="Runs the Sluice coordinator (scaling, sealing, shard-map publish, retention)",
            schedule=events.Schedule.rate(Duration.minutes(c.COORDINATOR_SCHEDULE_MINUTES)),
            # A missed tick is harmless (the next one catches up); retrying would overlap the next run.
            targets=[
                targets.LambdaFunction(coordinator, retry_attempts=0, max_event_age=Duration.minutes(1))
            ],
        )
