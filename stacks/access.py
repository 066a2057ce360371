"""Least-privilege grants, one function at a time. Each grant names only Sluice's own resources.

| function    | DynamoDB            | SSM (shard map)  | S3 segment bucket          | Lambda invoke        |
|-------------|---------------------|------------------|----------------------------|----------------------|
| broker      | control + shards RW | get, put, delete | put/get `overflow/*`       | coordinator          |
| consumer    | control + shards RW | get, put         | read + list, put overflow/ | push targets         |
| shard       | control + shards RW | -                | read/write/delete + list   | -                    |
| coordinator | control + shards RW | get, put, delete | -                          | consumer:live, shard |

The consumer writes `overflow/*` when it moves a message over the DynamoDB item limit to a dead letter
queue (and the shard map of a dead letter queue it creates again because it was deleted since it was
configured), and invokes the functions of push consumers of type `lambda`: only those context
`push_lambda_targets` names (default `sluice-<stage>-push-*`). The grants are checked against the calls
the handlers really make by the IAM call audit of the test suite (`sluice/local/iamcheck.py`).

Multi-region (`deployment` given; docs/design.md "Multi-region"): the control table's fencing writes go
to the home region's table, reads that tolerate lag to this region's replica; the broker also writes its
idempotency records to this region's replica. Publishes go to this region's shards, except ordered
queues (their keys hash over the home region's shards) and the fallback when a region has no open
shard: so broker and consumer may use every region's shard tables and segment bucket (the consumer
drains every region), while the coordinator and the shard function work on their own region's only.
Whoever changes a queue writes its shard map in every region, so broker and coordinator may write
the shard-map path in every region; so may the consumer, which creates a deleted dead letter queue
again, and reads its own region's.

| function    | control (home / own replica) | shard tables, bucket | SSM shard-map path       |
|-------------|------------------------------|----------------------|--------------------------|
| broker      | RW / RW                      | every region         | RW, every region         |
| consumer    | RW / read                    | every region         | read+write, every region |
| shard       | RW / read                    | own region           | -                        |
| coordinator | RW / read                    | own region           | read+write, every region |

The broker invokes the coordinator (asynchronously, its own region's) when its shards throttle: the wake
of sluice/engine/wake.py. The coordinator deletes SSM parameters in its own region only: it prunes the
mirror of a queue deleted while the region could not be reached (it lists the shard-map path and
deletes what no queue owns).

Metrics go out as CloudWatch EMF log lines (Powertools), so no function needs cloudwatch:PutMetricData.
The shard function has no trigger: the coordinator invokes it, and the consumer's SnapStart alias (its
ARN only: an unqualified grant would not cover it, and the coordinator never starts `$LATEST`) for push
delivery.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_dynamodb as ddb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from cdk_nag import NagPackSuppression, NagSuppressions

from sluice import constants as c
from stacks.nag import OWN_BUCKET_OBJECTS, PARTITION, iam5
from stacks.regions import Deployment
from stacks.storage import Storage

SSM_READ = ("ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath")
SSM_WRITE = ("ssm:PutParameter",)
SSM_DELETE = ("ssm:DeleteParameter", "ssm:DeleteParameters")
# cdk-nag IAM5 finding patterns (the wildcard resources the grants below have).
SHARD_MAP_PARAMETERS = rf"/^Resource::arn:{PARTITION}:ssm:.*shard-maps/\*$/g"
REMOTE_BUCKET_OBJECTS = rf"/^Resource::arn:{PARTITION}:s3:::sluice-.*-segments-.*\/.*\*$/g"
PUSH_TARGETS = rf"/^Resource::arn:{PARTITION}:lambda:.*$/g"


def shard_map_parameter_arns(stack: Stack, prefix: str, region: str | None = None) -> list[str]:
    """The path itself (for GetParametersByPath) and every parameter below it: nothing else in SSM.
    `region`: that region's path (default: the stack's)."""
    path = prefix.strip("/")
    return [
        stack.format_arn(service="ssm", resource="parameter", resource_name=path, region=region),
        stack.format_arn(service="ssm", resource="parameter", resource_name=f"{path}/*", region=region),
    ]


class RegionalResources:
    """Every region's tables and bucket as CDK resources (own region: the stack's; others: imported by
    their deterministic names), so grants use CDK's own action lists for them."""

    def __init__(self, storage: Storage, deployment: Deployment) -> None:
        stack = Stack.of(storage)
        self.deployment = deployment
        self.home_control = ddb.Table.from_table_arn(
            storage,
            "HomeControlTable",
            deployment.table_arn(stack, deployment.control_table_name, deployment.home),
        )
        self.own_control = storage.control_table
        self.shard_tables: dict[str, list[ddb.ITable]] = {deployment.region: list(storage.shard_tables)}
        self.buckets: dict[str, s3.IBucket] = {deployment.region: storage.segment_bucket}
        for region in deployment.others:
            self.shard_tables[region] = [
                ddb.Table.from_table_arn(storage, f"ShardTable{i}-{region}", arn)
                for i, arn in enumerate(deployment.shard_table_arns(stack, region))
            ]
            self.buckets[region] = s3.Bucket.from_bucket_name(
                storage, f"SegmentBucket-{region}", deployment.bucket_name(region)
            )


def push_target_arns(stack: Stack, targets: list[str]) -> list[str]:
    """Each configured target as a function ARN (names in this account and region), plus `:*` so
    versions and aliases of it (qualified ARNs) may be invoked too."""
    arns = []
    for target in targets:
        arn = (
            target
            if target.startswith("arn:")
            else stack.format_arn(
                service="lambda",
                resource="function",
                resource_name=target,
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
        )
        arns += [arn, f"{arn}:*"] if arn.count(":") == 6 else [arn]
    return arns


def grant_function_access(
    functions: dict[str, lambda_.Function],
    storage: Storage,
    *,
    push_lambda_targets: list[str],
    consumer_alias: lambda_.IFunction,
    deployment: Deployment | None = None,
) -> None:
    stack = Stack.of(storage)
    regional = RegionalResources(storage, deployment) if deployment else None
    every_region: list[str | None] = [*deployment.regions] if deployment else [None]
    bucket = storage.segment_bucket

    def ssm(fn: lambda_.Function, actions: tuple[str, ...], regions: list[str | None]) -> None:
        arns = [arn for r in regions for arn in shard_map_parameter_arns(stack, storage.shard_map_prefix, r)]
        fn.add_to_role_policy(iam.PolicyStatement(actions=list(actions), resources=arns))

    # The segment buckets broker and consumer use: every region's (the others use their own only).
    every_bucket: list[s3.IBucket] = list(regional.buckets.values()) if regional else [bucket]

    if regional is None:
        for fn in functions.values():
            for table in storage.all_tables:
                table.grant_read_write_data(fn)
    else:
        for name, fn in functions.items():
            regional.home_control.grant_read_write_data(fn)
            if not regional.deployment.is_home:
                if name == c.FN_BROKER:  # idempotency records are region-local
                    regional.own_control.grant_read_write_data(fn)
                else:
                    regional.own_control.grant_read_data(fn)
            everywhere = name in (c.FN_BROKER, c.FN_CONSUMER)
            for region, tables in regional.shard_tables.items():
                if everywhere or region == regional.deployment.region:
                    for table in tables:
                        table.grant_read_write_data(fn)

    broker = functions[c.FN_BROKER]
    ssm(broker, SSM_READ + SSM_WRITE + SSM_DELETE, every_region)
    broker.add_to_role_policy(  # the throttle wake (sluice/engine/wake.py): this function only
        iam.PolicyStatement(
            actions=["lambda:InvokeFunction"], resources=[functions[c.FN_COORDINATOR].function_arn]
        )
    )
    broker.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject", "s3:GetObject"],
            resources=[b.arn_for_objects(f"{c.OVERFLOW_PREFIX}*") for b in every_bucket],
        )
    )

    consumer = functions[c.FN_CONSUMER]
    ssm(consumer, SSM_READ + SSM_WRITE, every_region)  # a deleted dead letter queue is created again
    consumer.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[b.arn_for_objects("*") for b in every_bucket]
        )
    )
    consumer.add_to_role_policy(
        iam.PolicyStatement(actions=["s3:ListBucket"], resources=[b.bucket_arn for b in every_bucket])
    )
    consumer.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject"],
            resources=[b.arn_for_objects(f"{c.OVERFLOW_PREFIX}*") for b in every_bucket],
        )
    )
    if push_lambda_targets:
        consumer.add_to_role_policy(
            iam.PolicyStatement(
                actions=["lambda:InvokeFunction"], resources=push_target_arns(stack, push_lambda_targets)
            )
        )

    shard = functions[c.FN_SHARD]
    shard.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
            resources=[bucket.arn_for_objects("*")],
        )
    )
    shard.add_to_role_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn]))

    coordinator = functions[c.FN_COORDINATOR]
    ssm(coordinator, SSM_READ + SSM_WRITE, every_region)
    # It prunes its own region's mirrors of deleted queues (`QueueRegistry.prune_mirrors`), no others.
    ssm(coordinator, SSM_DELETE, [deployment.region] if deployment else [None])
    coordinator.add_to_role_policy(
        iam.PolicyStatement(
            actions=["lambda:InvokeFunction"],
            resources=[consumer_alias.function_arn, functions[c.FN_SHARD].function_arn],
        )
    )

    for name, fn in functions.items():
        assert fn.role is not None
        NagSuppressions.add_resource_suppressions(
            fn.role, role_suppressions(name, multi_region=deployment is not None), apply_to_children=True
        )


def role_suppressions(name: str, *, multi_region: bool) -> list[NagPackSuppression]:
    """The wildcard resources a function's role has, each with why it cannot be narrower."""
    found = [
        iam5(
            "X-Ray PutTraceSegments/PutTelemetryRecords support no resource-level permissions, so active "
            "tracing needs Resource '*'.",
            "Resource::*",
        )
    ]
    if name != c.FN_SHARD:
        found.append(
            iam5(
                "Shard maps are one SSM parameter per queue created at runtime; the grant is limited to this "
                "stage's shard-map path" + (" in each region of the deployment." if multi_region else "."),
                SHARD_MAP_PARAMETERS,
            )
        )
    if name != c.FN_COORDINATOR:
        found.append(
            iam5(
                "Segment and overflow object keys are created at runtime (queue, shard, sequence range); the "
                "grant is limited to this one bucket"
                + (" and its overflow/ prefix." if name == c.FN_BROKER else "."),
                OWN_BUCKET_OBJECTS,
            )
        )
    if multi_region and name in (c.FN_BROKER, c.FN_CONSUMER):
        found.append(
            iam5(
                "Segment and overflow object keys are created at runtime; the grant is limited to the other "
                "regions' segment buckets of this stage (sluice-<stage>-segments-<account>-<region>), which "
                "this function reads or writes across regions.",
                REMOTE_BUCKET_OBJECTS,
            )
        )
    if name == c.FN_CONSUMER:
        found.append(
            iam5(
                "Push consumers of type lambda invoke user functions chosen at runtime; the grant is limited "
                "to the functions named by context push_lambda_targets (default sluice-<stage>-push-*) and "
                "their versions.",
                PUSH_TARGETS,
            )
        )
    return found
