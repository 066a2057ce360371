"""Storage: the control table, N shard tables, the segment bucket (and its access-log bucket).

Every table has the same key schema (`pk` S / `sk` S), TTL on `exp`, point-in-time recovery and
AWS-managed encryption. Billing is on demand, except the shard tables with `capacity=provisioned`:
provisioned read and write capacity with target-tracking autoscaling (the control table's traffic is
small and bursty, so it stays on demand). The local runtime reads these definitions back from the template,
so what is defined here is what `sluice local` creates on moto.

Segment bucket layout and lifecycle (anything not listed lives until the engine deletes it):
- `segments/<queue>/<incarnation>/<shard>/...`  flushed segments. Retention of non-bottomless queues is
  per queue, so the shard function deletes expired segments itself; a bucket rule cannot know a queue's
  retention, and no rule may name a prefix under `segments/` (`segments/tmp/` is queue "tmp").
- `overflow/`                     message bodies too large for a DynamoDB item: expire after 15 days
  (longer than the 14-day maximum hot retention).
- `payload/<shard pk>/<first seq>` the payload tier: one send's bodies each (sluice/engine/payloads.py),
  tagged `sluice-days=N` (2..15): one rule per N expires them N days after creation, a day after
  their batch items expire. The flush deletes the orphans of sends that crashed before their items.
- `glue/tmp/`                     Glue `--TempDir`: expires after 7 days.
- `exports/`                      Parquet written by the Glue pull consumer: kept.
Incomplete multipart uploads are aborted after 1 day everywhere.

Names: the tables and the segment bucket, which keep the data and are retained on `cdk destroy` (unless
`retain_data=false`), have deterministic names (`constants.physical_name`): `sluice-<stage>-control`,
`sluice-<stage>-shards-<i>`, `sluice-<stage>-segments-<account>-<region>`. A deploy after a destroy
then finds them under the same names and adopts them (`cdk deploy --import-existing-resources`: CloudFormation
imports a retained resource whose literal name the template gives, docs/deploy.md). The bucket's name is
literal when the CDK CLI knows the account and region (`app.deploy_target`), a deploy-time join otherwise.
The access-log bucket keeps a generated name: a retained one is left behind, never in the way.

Multi-region (`deployment` given): the home region's stack defines the control table as a global table
(`TableV2`, one replica in every other region) and the other regions' stacks refer to their replica
by name. Each region has its own shard tables (same names everywhere) and its own bucket.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as ddb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from sluice import constants as c
from sluice.segmentformat import SEGMENT_PREFIX
from stacks.regions import Deployment

SEGMENTS_PREFIX = f"{SEGMENT_PREFIX}/"
GLUE_TMP_PREFIX = "glue/tmp/"
EXPORTS_PREFIX = "exports/"


class Storage(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        shard_table_count: int,
        retain: bool,
        capacity: ShardCapacity | None = None,
        deployment: Deployment | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        removal = RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY
        self.deployment = deployment

        self.control_table: ddb.ITable = (
            self._table(stage, c.LOGICAL_CONTROL_TABLE, removal)
            if deployment is None
            else self._control_table(deployment, removal)
        )
        self.shard_tables = [
            self._table(stage, f"{c.LOGICAL_SHARD_TABLE_PREFIX}{i}", removal, capacity)
            for i in range(shard_table_count)
        ]
        stack = Stack.of(self)
        bucket_name = (
            deployment.bucket_name(deployment.region)
            if deployment
            else c.physical_name(stage, c.LOGICAL_SEGMENT_BUCKET, account=stack.account, region=stack.region)
        )

        self.access_log_bucket = s3.Bucket(
            self,
            "AccessLogBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            lifecycle_rules=[s3.LifecycleRule(id="expire-access-logs", expiration=Duration.days(90))],
            removal_policy=removal,
        )
        self.segment_bucket = s3.Bucket(
            self,
            c.LOGICAL_SEGMENT_BUCKET,
            bucket_name=bucket_name,
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            server_access_logs_bucket=self.access_log_bucket,
            server_access_logs_prefix="segment-bucket/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="abort-incomplete-uploads", abort_incomplete_multipart_upload_after=Duration.days(1)
                ),
                s3.LifecycleRule(
                    id="expire-overflow", prefix=c.OVERFLOW_PREFIX, expiration=Duration.days(15)
                ),
                s3.LifecycleRule(id="expire-glue-tmp", prefix=GLUE_TMP_PREFIX, expiration=Duration.days(7)),
                *payload_rules(),
            ],
            removal_policy=removal,
        )
        # Pin logical ids to the names in sluice.constants: the local runtime finds resources by them.
        _pin_logical_id(self.segment_bucket, c.LOGICAL_SEGMENT_BUCKET)
        # The shard map: one SSM parameter per queue below this path, written at runtime by the
        # coordinator/broker (not a stack resource), so the stack only grants on the path.
        self.shard_map_prefix = c.SHARD_MAP_PREFIX_TEMPLATE.format(stage=stage)

    @property
    def all_tables(self) -> list[ddb.ITable]:
        return [self.control_table, *self.shard_tables]

    def _control_table(self, deployment: Deployment, removal: RemovalPolicy) -> ddb.ITable:
        """Home region: the global table with a replica in every other region (multi-region eventual
        consistency: the fencing conditional writes all go to the home replica, docs/design.md). Other
        regions: their replica, by name."""
        name = deployment.control_table_name
        if not deployment.is_home:
            return ddb.Table.from_table_name(self, c.LOGICAL_CONTROL_TABLE, name)
        table = ddb.TableV2(
            self,
            c.LOGICAL_CONTROL_TABLE,
            table_name=name,
            partition_key=ddb.Attribute(name=c.PARTITION_KEY, type=ddb.AttributeType.STRING),
            sort_key=ddb.Attribute(name=c.SORT_KEY, type=ddb.AttributeType.STRING),
            billing=ddb.Billing.on_demand(),
            time_to_live_attribute=c.TTL_ATTRIBUTE,
            point_in_time_recovery_specification=ddb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=ddb.TableEncryptionV2.aws_managed_key(),
            replicas=[ddb.ReplicaTableProps(region=region) for region in deployment.others],
            removal_policy=removal,
        )
        _pin_logical_id(table, c.LOGICAL_CONTROL_TABLE)
        return table

    def _table(
        self, stage: str, logical_id: str, removal: RemovalPolicy, capacity: ShardCapacity | None = None
    ) -> ddb.Table:
        table = ddb.Table(
            self,
            logical_id,
            table_name=c.physical_name(stage, logical_id),
            partition_key=ddb.Attribute(name=c.PARTITION_KEY, type=ddb.AttributeType.STRING),
            sort_key=ddb.Attribute(name=c.SORT_KEY, type=ddb.AttributeType.STRING),
            billing_mode=ddb.BillingMode.PROVISIONED if capacity else ddb.BillingMode.PAY_PER_REQUEST,
            read_capacity=capacity.min_read if capacity else None,
            write_capacity=capacity.min_write if capacity else None,
            time_to_live_attribute=c.TTL_ATTRIBUTE,
            point_in_time_recovery_specification=ddb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=ddb.TableEncryption.AWS_MANAGED,
            removal_policy=removal,
        )
        _pin_logical_id(table, logical_id)
        if capacity:
            capacity.autoscale(table)
        return table


@dataclass(frozen=True)
class ShardCapacity:
    """Provisioned capacity of a shard table: starts at the minimum, target tracking keeps consumed
    units at `target_percent` of provisioned between the bounds (read and write scale separately)."""

    min_write: int
    max_write: int
    min_read: int
    max_read: int
    target_percent: int

    def autoscale(self, table: ddb.Table) -> None:
        writes = table.auto_scale_write_capacity(min_capacity=self.min_write, max_capacity=self.max_write)
        writes.scale_on_utilization(target_utilization_percent=self.target_percent)
        reads = table.auto_scale_read_capacity(min_capacity=self.min_read, max_capacity=self.max_read)
        reads.scale_on_utilization(target_utilization_percent=self.target_percent)


def _pin_logical_id(construct: Construct, logical_id: str) -> None:
    cfn = construct.node.default_child
    assert isinstance(cfn, CfnResource)
    cfn.override_logical_id(logical_id)


def payload_rules() -> list[s3.LifecycleRule]:
    """Expire payload-tier objects by the days their tag asks for (2 .. PAYLOAD_MAX_DAYS)."""
    return [
        s3.LifecycleRule(
            id=f"expire-payload-{days}d",
            prefix=c.PAYLOAD_PREFIX,
            tag_filters={c.PAYLOAD_DAYS_TAG: str(days)},
            expiration=Duration.days(days),
        )
        for days in range(2, c.PAYLOAD_MAX_DAYS + 1)
    ]
