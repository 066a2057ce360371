"""Least-privilege grants, one function at a time. Each grant names only Sluice's own resources.

| function    | DynamoDB            | SSM (shard map)  | S3 segment bucket          | Lambda invoke        |
|-------------|---------------------|------------------|----------------------------|----------------------|
| broker      | control + shards RW | get, put, delete | put/get `overflow/*`       | -                    |
| consumer    | control + shards RW | get              | read + list, put overflow/ | push targets         |
| shard       | control + shards RW | -                | read/write/delete + list   | -                    |
| coordinator | control + shards RW | get, put         | -                          | consumer:live, shard |

The consumer writes `overflow/*` when it moves a message over the DynamoDB item limit to a dead letter
queue, and invokes the functions of push consumers of type `lambda`: only those context
`push_lambda_targets` names (default `sluice-<stage>-push-*`). The grants are checked against the calls
the handlers really make by the IAM call audit of the test suite (`sluice/local/iamcheck.py`).

Metrics go out as CloudWatch EMF log lines (Powertools), so no function needs cloudwatch:PutMetricData.
The shard function has no trigger: the coordinator invokes it, and the consumer's SnapStart alias (its
ARN only: an unqualified grant would not cover it, and the coordinator never starts `$LATEST`) for push
delivery.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from cdk_nag import NagSuppressions

from sluice import constants as c
from stacks.storage import Storage

SSM_READ = ("ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath")
SSM_WRITE = ("ssm:PutParameter",)
SSM_DELETE = ("ssm:DeleteParameter", "ssm:DeleteParameters")


def shard_map_parameter_arns(stack: Stack, prefix: str) -> list[str]:
    """The path itself (for GetParametersByPath) and every parameter below it: nothing else in SSM."""
    path = prefix.strip("/")
    return [
        stack.format_arn(service="ssm", resource="parameter", resource_name=path),
        stack.format_arn(service="ssm", resource="parameter", resource_name=f"{path}/*"),
    ]


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
) -> None:
    stack = Stack.of(storage)
    ssm_arns = shard_map_parameter_arns(stack, storage.shard_map_prefix)
    bucket = storage.segment_bucket

    def ssm(fn: lambda_.Function, actions: tuple[str, ...]) -> None:
        fn.add_to_role_policy(iam.PolicyStatement(actions=list(actions), resources=ssm_arns))

    for fn in functions.values():
        for table in storage.all_tables:
            table.grant_read_write_data(fn)

    broker = functions[c.FN_BROKER]
    ssm(broker, SSM_READ + SSM_WRITE + SSM_DELETE)
    broker.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject", "s3:GetObject"],
            resources=[bucket.arn_for_objects(f"{c.OVERFLOW_PREFIX}*")],
        )
    )

    consumer = functions[c.FN_CONSUMER]
    ssm(consumer, SSM_READ)
    consumer.add_to_role_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects("*")])
    )
    consumer.add_to_role_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn]))
    consumer.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:PutObject"], resources=[bucket.arn_for_objects(f"{c.OVERFLOW_PREFIX}*")]
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
    ssm(coordinator, SSM_READ + SSM_WRITE)
    coordinator.add_to_role_policy(
        iam.PolicyStatement(
            actions=["lambda:InvokeFunction"],
            resources=[consumer_alias.function_arn, functions[c.FN_SHARD].function_arn],
        )
    )

    for name, fn in functions.items():
        assert fn.role is not None
        NagSuppressions.add_resource_suppressions(
            fn.role,
            [
                {
                    "id": "AwsSolutions-IAM5",
                    "reason": "X-Ray PutTraceSegments/PutTelemetryRecords support no resource-level "
                    "permissions, so active tracing needs Resource '*'.",
                    "applies_to": ["Resource::*"],
                },
                *(
                    [
                        {
                            "id": "AwsSolutions-IAM5",
                            "reason": "Shard maps are one SSM parameter per queue created at runtime; the "
                            "grant is limited to this stage's shard-map path.",
                            "applies_to": [
                                {"regex": "/^Resource::arn:<AWS::Partition>:ssm:.*shard-maps/\\*$/g"}
                            ],
                        }
                    ]
                    if name != c.FN_SHARD
                    else []
                ),
                *(
                    [
                        {
                            "id": "AwsSolutions-IAM5",
                            "reason": "Segment and overflow object keys are created at runtime (queue, "
                            "shard, sequence range); the grant is limited to this one bucket"
                            + (" and its overflow/ prefix." if name == c.FN_BROKER else "."),
                            "applies_to": [{"regex": "/^Resource::<.*SegmentBucket.*\\.Arn>\\/.*\\*$/g"}],
                        }
                    ]
                    if name != c.FN_COORDINATOR
                    else []
                ),
                *(
                    [
                        {
                            "id": "AwsSolutions-IAM5",
                            "reason": "Push consumers of type lambda invoke user functions chosen at "
                            "runtime; the grant is limited to the functions named by context "
                            "push_lambda_targets (default sluice-<stage>-push-*) and their versions.",
                            "applies_to": [{"regex": "/^Resource::arn:<AWS::Partition>:lambda:.*$/g"}],
                        }
                    ]
                    if name == c.FN_CONSUMER
                    else []
                ),
            ],
            apply_to_children=True,
        )
