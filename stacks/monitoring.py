"""Alarms and one dashboard: queue health (oldest message age), function errors, DynamoDB throttles, API.

The oldest-message-age metric is emitted by the coordinator through Powertools EMF under namespace
`constants.METRICS_NAMESPACE`, metric `constants.METRIC_OLDEST_MESSAGE_AGE`, dimension
`service=constants.SERVICE_NAME`. Alarms have no actions: wire an SNS topic to them per deployment.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_dynamodb as ddb
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from sluice import constants as c

PERIOD = Duration.minutes(5)


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        functions: dict[str, lambda_.Function],
        tables: list[ddb.ITable],
        api: apigwv2.HttpApi,
        oldest_age_seconds: float,
        lambda_errors: int,
        ddb_throttles: int,
        dashboard_name: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.alarms: list[cw.Alarm] = []

        self.oldest_age = cw.Metric(
            namespace=c.METRICS_NAMESPACE,
            metric_name=c.METRIC_OLDEST_MESSAGE_AGE,
            dimensions_map={"service": c.SERVICE_NAME},
            statistic=cw.Stats.MAXIMUM,
            period=Duration.minutes(1),
            label="Oldest unacked message age (s)",
        )
        self._alarm(
            "OldestMessageAgeAlarm",
            self.oldest_age,
            oldest_age_seconds,
            f"sluice-{stage}: a queue's oldest unacked message is older than {oldest_age_seconds:g} s",
            evaluation_periods=5,
        )
        for name, fn in functions.items():
            self._alarm(
                f"{name.capitalize()}ErrorsAlarm",
                fn.metric_errors(period=PERIOD, statistic=cw.Stats.SUM),
                lambda_errors,
                f"sluice-{stage}: the {name} function failed {lambda_errors}+ times in 5 minutes",
            )
        self.table_throttles: dict[str, cw.MathExpression] = {}
        for i, table in enumerate(tables):
            logical = table.node.id
            # Ids must be unique across expressions drawn on one graph.
            throttles = cw.MathExpression(
                expression=f"r{i} + w{i}",
                using_metrics={
                    f"r{i}": table.metric("ReadThrottleEvents", period=PERIOD, statistic=cw.Stats.SUM),
                    f"w{i}": table.metric("WriteThrottleEvents", period=PERIOD, statistic=cw.Stats.SUM),
                },
                period=PERIOD,
                label=f"{logical} throttles",
            )
            self.table_throttles[logical] = throttles
            self._alarm(
                f"{logical}ThrottlesAlarm",
                throttles,
                ddb_throttles,
                f"sluice-{stage}: {logical} throttled {ddb_throttles}+ requests in 5 minutes "
                "(the coordinator should be adding shards)",
            )

        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=dashboard_name or f"sluice-{stage}")
        self.dashboard.add_widgets(
            cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24, height=4),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(title="Oldest unacked message age (s)", left=[self.oldest_age], width=12),
            cw.GraphWidget(
                title="API requests and errors",
                left=[api.metric_count(period=PERIOD)],
                right=[api.metric_client_error(period=PERIOD), api.metric_server_error(period=PERIOD)],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Lambda invocations",
                left=[fn.metric_invocations(period=PERIOD, label=n) for n, fn in functions.items()],
                width=8,
            ),
            cw.GraphWidget(
                title="Lambda errors and throttles",
                left=[fn.metric_errors(period=PERIOD, label=f"{n} errors") for n, fn in functions.items()],
                right=[
                    fn.metric_throttles(period=PERIOD, label=f"{n} throttles") for n, fn in functions.items()
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Lambda duration p99 (ms)",
                left=[
                    fn.metric_duration(period=PERIOD, statistic="p99", label=n) for n, fn in functions.items()
                ],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="DynamoDB consumed capacity",
                left=[
                    t.metric_consumed_write_capacity_units(period=PERIOD, label=f"{t.node.id} WCU")
                    for t in tables
                ],
                right=[
                    t.metric_consumed_read_capacity_units(period=PERIOD, label=f"{t.node.id} RCU")
                    for t in tables
                ],
                width=12,
            ),
            cw.GraphWidget(title="DynamoDB throttles", left=list(self.table_throttles.values()), width=12),
        )
        self.dashboard.add_widgets(
            cw.LogQueryWidget(
                title="Recent function errors",
                log_group_names=[fn.log_group.log_group_name for fn in functions.values()],
                query_lines=[
                    "fields @timestamp, service, level, message",
                    "filter level = 'ERROR'",
                    "sort @timestamp desc",
                    "limit 50",
                ],
                width=24,
            ),
        )

    def _alarm(
        self,
        construct_id: str,
        metric: cw.IMetric,
        threshold: float,
        description: str,
        evaluation_periods: int = 1,
    ) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        self.alarms.append(alarm)
        return alarm
