"""`SluiceStack`: storage, functions, grants, HTTP API, schedule, Glue jobs, monitoring, outputs.

Environment-agnostic (no account/region at synth): ARNs use `Aws.REGION`/`Aws.ACCOUNT_ID` tokens, so
`python app.py` needs no AWS credentials and one template deploys to any region.

Multi-region (`deployment` given, one stack per region): the stack's region is set (the global table
and the secret replicas need it), the account stays a token. Resources are named deterministically
(`stacks.regions`), the home stack holds the global control table and the lease-key secret, and every
function is told every region and every region's bucket.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Fn, Stack, Tags
from constructs import Construct

from sluice import constants as c
from stacks.access import grant_function_access
from stacks.api import HttpApi
from stacks.config import SluiceConfig
from stacks.functions import FunctionFactory, base_environment
from stacks.glue import GlueJobs
from stacks.leasekey import LeaseKey
from stacks.monitoring import Monitoring
from stacks.regions import Deployment
from stacks.schedule import CoordinatorSchedule
from stacks.storage import ShardCapacity, Storage

# aws secretsmanager put-secret-value --secret-id <secret> --secret-string "$(curl ... <api>/v1/tokens ...)"
# `jq -e` fails on a missing token, so an error answer never becomes the secret's value.
GLUE_TOKEN_COMMAND = (
    "aws secretsmanager put-secret-value --secret-id ",
    ' --secret-string "$(curl -sS -X POST ',
    "/v1/tokens -H \"Authorization: Bearer $TOKEN\" -H 'content-type: application/json' "
    """-d '{"queue": "'"$QUEUE"'", "scopes": ["read", "write"]}' | jq -er .result.token)\"""",
)


class SluiceStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: SluiceConfig,
        deployment: Deployment | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope, construct_id, description=f"Sluice serverless sharded queues ({config.stage})", **kwargs
        )
        self.config = config
        self.deployment = deployment
        # Dashboard names are global to the account: one per region when there are several.
        self.dashboard_name = f"sluice-{config.stage}" + (f"-{deployment.region}" if deployment else "")
        Tags.of(self).add("project", "sluice")
        Tags.of(self).add("sluice:stage", config.stage)

        self.storage = Storage(
            self,
            "Storage",
            stage=config.stage,
            shard_table_count=config.shard_table_count,
            retain=config.retain_data,
            capacity=shard_capacity(config),
            deployment=deployment,
        )
        self.lease_key = LeaseKey(self, "LeaseKey", deployment=deployment)
        environment = base_environment(
            control_table=self.storage.control_table.table_name,
            shard_tables=[t.table_name for t in self.storage.shard_tables],
            segment_bucket=self.storage.segment_bucket.bucket_name,
            shard_map_prefix=self.storage.shard_map_prefix,
            stage=config.stage,
            lease_key_secret=self.lease_key.secret_id,
            regions=list(deployment.regions) if deployment else None,
            region=deployment.region if deployment else None,
            segment_buckets={r: deployment.bucket_name(r) for r in deployment.regions}
            if deployment
            else None,
        )
        if config.open_stream_prefix:  # the documented no-token opt-in (docs/api.md)
            environment[c.ENV_OPEN_STREAM_PREFIX] = config.open_stream_prefix
        factory = FunctionFactory(
            self,
            "Functions",
            stage=config.stage,
            environment=environment,
            log_retention_days=config.log_retention_days,
            memory_mb=config.memory_mb,
            reserved_concurrency=config.reserved_concurrency,
            powertools_layer_arn=config.powertools_layer_arn,
            powertools_version=config.powertools_version,
            powertools_layer_version=config.powertools_layer_version,
            retain_logs=config.retain_data,
        )
        self.functions = factory.create_all()
        # The coordinator starts push workers and shard work by name: push workers through the
        # consumer's SnapStart alias (`<name>:live`, so they resume from the snapshot as the API's
        # requests do), shard work on the shard function, which has no alias.
        coordinator = self.functions[c.FN_COORDINATOR]
        consumer_alias = factory.aliases[c.FN_CONSUMER]
        coordinator.add_environment(
            c.ENV_CONSUMER_FUNCTION,
            f"{self.functions[c.FN_CONSUMER].function_name}:{consumer_alias.alias_name}",
        )
        coordinator.add_environment(c.ENV_SHARD_FUNCTION, self.functions[c.FN_SHARD].function_name)
        # A broker whose shards throttle wakes the coordinator (sluice/engine/wake.py).
        self.functions[c.FN_BROKER].add_environment(c.ENV_COORDINATOR_FUNCTION, coordinator.function_name)
        grant_function_access(
            self.functions,
            self.storage,
            push_lambda_targets=config.push_lambda_target_list,
            consumer_alias=consumer_alias,
            deployment=deployment,
        )
        self.lease_key.grant_read([self.functions[c.FN_BROKER], self.functions[c.FN_CONSUMER]])

        self.http = HttpApi(
            self,
            "Http",
            stage=config.stage,
            functions=factory.api_targets(),
            throttle_rate=config.api_throttle_rate,
            throttle_burst=config.api_throttle_burst,
            route_throttles=config.route_throttles,
            log_retention_days=config.log_retention_days,
            retain_logs=config.retain_data,
        )
        self.schedule = CoordinatorSchedule(
            self,
            "Schedule",
            stage=config.stage,
            coordinator=coordinator,
            # Push workers start on the consumer's alias: its own EventInvokeConfig (Qualifier `live`).
            started_by_coordinator=[self.functions[c.FN_SHARD], consumer_alias],
            tick_seconds=config.coordinator_tick_seconds,
            flush_seconds=config.shard_flush_seconds,
            maintenance_seconds=config.shard_maintenance_seconds,
        )
        self.glue = GlueJobs(self, "Glue", stage=config.stage, storage=self.storage, api_url=self.http.url)
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            stage=config.stage,
            functions=self.functions,
            tables=self.storage.all_tables,
            api=self.http.api,
            oldest_age_seconds=config.alarm_oldest_message_age_seconds,
            lambda_errors=config.alarm_lambda_errors,
            ddb_throttles=config.alarm_ddb_throttles,
            dashboard_name=self.dashboard_name,
        )

        CfnOutput(self, "ApiUrl", value=self.http.url, description="Base URL of the Sluice HTTP API")
        CfnOutput(self, "SegmentBucketName", value=self.storage.segment_bucket.bucket_name)
        CfnOutput(self, "ControlTableName", value=self.storage.control_table.table_name)
        CfnOutput(self, "GlueTokenSecretArn", value=self.glue.token_secret.secret_arn)
        # The secret starts as a random value: Glue pull-consumer runs get 401 until a real token
        # (read+write on the job's queue) is stored in it. The exact command, with this stack's names:
        CfnOutput(
            self,
            "GlueTokenSetup",
            description="With TOKEN (admin) and QUEUE set: mint a read+write token and store it for Glue",
            value=Fn.join(
                "",
                [
                    GLUE_TOKEN_COMMAND[0],
                    self.glue.token_secret.secret_arn,
                    GLUE_TOKEN_COMMAND[1],
                    self.http.url,
                    GLUE_TOKEN_COMMAND[2],
                ],
            ),
        )
        # Multi-region: the secret's name (each region's replica has it; rotate in the home region).
        CfnOutput(self, "LeaseKeySecretArn", value=self.lease_key.secret_id)
        CfnOutput(self, "DashboardName", value=self.dashboard_name)
        CfnOutput(self, "ApiAccessLogGroup", value=self.http.access_logs.log_group_name)
        for name, fn in self.functions.items():
            CfnOutput(self, f"{name.capitalize()}LogGroup", value=fn.log_group.log_group_name)


def shard_capacity(config: SluiceConfig) -> ShardCapacity | None:
    """The shard tables' provisioned capacity (`-c capacity=provisioned`), or None: on demand."""
    if config.capacity != c.CAPACITY_PROVISIONED:
        return None
    return ShardCapacity(
        min_write=config.capacity_min_write,
        max_write=config.capacity_max_write,
        min_read=config.capacity_min_read,
        max_read=config.capacity_max_read,
        target_percent=config.capacity_target_utilization,
    )
