"""Least-privilege grants, one function at a time: each function gets the actions its code calls (the IAM
call audit of the test suite records them, and `make test` fails on a grant no call used:
`sluice/local/iamcheck.py`), on Sluice's own resources only.

| function | control table | shard tables | SSM shard maps | S3 segment bucket |
|---|---|---|---|---|
| broker | G P U D Q | G P U D Q BG | get put delete | get/put ovf pay |
| consumer | G U Q | G P U Q BG | get (own region) | get seg ovf pay; put ovf pay |
| shard | G P D Q | G P U Q BW | - | get/put/del seg; get/del/list pay; get ovf |
| coordinator | G P U Q | U Q BG | get put; delete (own) | - |

(G GetItem, P PutItem, U UpdateItem, D DeleteItem, Q Query, BG BatchGetItem, BW BatchWriteItem; seg
`segments/*`, ovf `overflow/*`, pay `payload/*`, each put with its tag: s3:PutObjectTagging.)
Lambda invoke: the broker the coordinator (the wake), the consumer its push targets, the coordinator the
consumer's `live` alias and the shard function. Nobody scans, and only the shard function deletes objects
or lists the bucket: `segments/` (flush, compaction, retention) and `payload/` (the flush deletes the
objects of sends that crashed before their items, listing that prefix alone), never Glue's `exports/`.
The payload tier (sluice/engine/payloads.py) puts a send's bodies in one `payload/*` object, tagged with
the days its lifecycle rule keeps it (s3:PutObjectTagging): the broker for sends and redrives, the
consumer for dead-letter moves; whoever serves a read of the queue (the consumer's pulls and stream
reads, the broker's peek, redrive and SQS receives, the shard's flush) reads it; so is `overflow/*` (a
body over the DynamoDB item limit), which the flush reads into segments too. The consumer writes
`overflow/*` when it moves a message over the DynamoDB item limit to a dead letter queue, and invokes the
functions of push consumers of type `lambda`: only those context `push_lambda_targets` names (default
`sluice-<stage>-push-*`).

Multi-region (`deployment` given; docs/design.md "Multi-region"): the control table's fencing writes go
to the home region's table, the reads that tolerate lag to this region's replica: token lookups (broker,
consumer) and the broker's idempotency records (`REPLICA_ACTIONS`). Publishes go to this region's
shards, except ordered queues (their keys hash over the home region's shards) and the fallback when a
region has no open shard: so broker and consumer may use every region's shard tables and segment
bucket (the consumer drains every region), while the coordinator and the shard function work on their
own region's only. Whoever changes a queue writes its shard map in every region, so broker and
coordinator may write the shard-map path in every region; the consumer reads its own region's (a deleted
dead letter queue is created again by the coordinator's pass, never by the consumer). The coordinator
deletes SSM parameters in its own region only: it prunes the mirror of a queue deleted while the region
could not be reached (it lists the shard-map path and deletes what no queue owns).

The broker invokes the coordinator (asynchronously, its own region's) when its shards throttle: the wake
of sluice/engine/wake.py.

cdk-nag: every wildcard resource a role holds is suppressed by name, finding by finding (`WildcardGrants`
records each with its reason as it is granted), so a new or wider wildcard is still an error.

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
from stacks.nag import finding, iam5
from stacks.regions import Deployment
from stacks.storage import SEGMENTS_PREFIX, Storage

# A shard map is one parameter, or split over several (large queues) read back with GetParameters.
SSM_READ = ("ssm:GetParameter", "ssm:GetParameters")


def _ddb(*operations: str) -> tuple[str, ...]:
    return tuple(f"dynamodb:{op}" for op in operations)


# The DynamoDB actions each function's code calls, table by table: what the IAM call audit records for it
# (tests/conftest.py; `make test` fails on a granted action no call used: sluice/local/iamcheck.py).
CONTROL_ACTIONS: dict[str, tuple[str, ...]] = {
    # queue documents, tokens, push consumer configs, idempotency records (single region)
    c.FN_BROKER: _ddb("GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query"),
    # queue documents, token lookups, pull consumer registrations (the coordinator creates a dead letter
    # queue again, never the consumer: no PutItem)
    c.FN_CONSUMER: _ddb("GetItem", "UpdateItem", "Query"),
    # the segment index (written by flush, rewritten by compaction, pruned by retention), queue documents
    c.FN_SHARD: _ddb("GetItem", "PutItem", "DeleteItem", "Query"),
    # queue documents and shard maps, its lease and saved state, push worker slots
    c.FN_COORDINATOR: _ddb("GetItem", "PutItem", "UpdateItem", "Query"),
}
# Multi-region: what goes to this region's replica of the control table rather than the home table (reads
# that tolerate replication lag): token lookups, and the broker's idempotency records.
REPLICA_ACTIONS: dict[str, tuple[str, ...]] = {
    c.FN_BROKER: _ddb("GetItem", "PutItem", "UpdateItem", "DeleteItem"),
    c.FN_CONSUMER: _ddb("GetItem"),
}
SHARD_ACTIONS: dict[str, tuple[str, ...]] = {
    # publish (HEAD allocation, batch items), reads, purge and group deletion
    c.FN_BROKER: _ddb("GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "BatchGetItem"),
    # pull, ack, leases, stream reads; gap tombstones and dead-letter publishes
    c.FN_CONSUMER: _ddb("GetItem", "PutItem", "UpdateItem", "Query", "BatchGetItem"),
    # flush marks and TTL on items, gap tombstones, retention's batch deletes
    c.FN_SHARD: _ddb("GetItem", "PutItem", "UpdateItem", "Query", "BatchWriteItem"),
    # observing HEADs and group states (and the item holding a stripe's ack level), sealing shards
    c.FN_COORDINATOR: _ddb("UpdateItem", "Query", "BatchGetItem"),
}
SSM_WRITE = ("ssm:PutParameter",)
SSM_DELETE = ("ssm:DeleteParameters",)  # a queue's parameter and a split map's parts, in one call
# The coordinator lists the path and deletes, in batches, the mirrors no queue owns any more.
SSM_PRUNE = ("ssm:GetParametersByPath", "ssm:DeleteParameters")
# Why each kind of wildcard resource cannot be narrower (cdk-nag IAM5 suppressions, finding by finding).
XRAY_REASON = (
    "X-Ray PutTraceSegments/PutTelemetryRecords support no resource-level permissions, so active tracing "
    "needs Resource '*'."
)
SHARD_MAP_REASON = (
    "Shard maps are SSM parameters per queue created at runtime; the grant is this stage's shard-map path "
    "only (/sluice/<stage>/shard-maps/*), in the regions listed."
)
OBJECTS_REASON = (
    "Object keys are created at runtime (queue, shard, sequence range); the grant is the prefixes this "
    "function reads or writes (segments/, overflow/, payload/) of this stage's segment buckets, nothing else."
)
PUSH_TARGETS_REASON = (
    "Push consumers of type lambda invoke user functions chosen at runtime; the grant is the functions "
    "context push_lambda_targets names (default sluice-<stage>-push-*) and their versions and aliases."
)


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


class WildcardGrants:
    """Grants a role a statement, and remembers each wildcard resource in it with the reason it is one,
    so the role's cdk-nag suppressions name exactly those findings."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.findings: dict[lambda_.Function, dict[str, list[str]]] = {}

    def grant(self, fn: lambda_.Function, actions: tuple[str, ...], *resources: str, why: str = "") -> None:
        fn.add_to_role_policy(iam.PolicyStatement(actions=list(actions), resources=list(resources)))
        wild = [finding(self.stack, r) for r in resources if "*" in r]
        if wild:
            assert why, f"a wildcard grant needs its reason: {actions}"
            found = self.findings.setdefault(fn, {}).setdefault(why, [])
            found += [f for f in wild if f not in found]

    def suppressions(self, fn: lambda_.Function) -> list[NagPackSuppression]:
        found = [iam5(XRAY_REASON, "Resource::*")]
        return found + [iam5(why, *names) for why, names in self.findings.get(fn, {}).items()]


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
    grants = WildcardGrants(stack)
    regional = RegionalResources(storage, deployment) if deployment else None
    every_region: list[str | None] = [*deployment.regions] if deployment else [None]
    own_region = deployment.region if deployment else None
    bucket = storage.segment_bucket
    # The segment buckets broker and consumer use: every region's (the others use their own only).
    every_bucket: list[s3.IBucket] = list(regional.buckets.values()) if regional else [bucket]

    def ssm(fn: lambda_.Function, actions: tuple[str, ...], regions: list[str | None]) -> None:
        arns = [arn for r in regions for arn in shard_map_parameter_arns(stack, storage.shard_map_prefix, r)]
        grants.grant(fn, actions, *arns, why=SHARD_MAP_REASON)

    def objects(
        fn: lambda_.Function, actions: tuple[str, ...], buckets: list[s3.IBucket], *prefixes: str
    ) -> None:
        arns = [b.arn_for_objects(f"{prefix}*") for b in buckets for prefix in prefixes]
        grants.grant(fn, actions, *arns, why=OBJECTS_REASON)

    for name, fn in functions.items():
        control = regional.home_control if regional else storage.control_table
        grants.grant(fn, CONTROL_ACTIONS[name], control.table_arn)
        if regional and not regional.deployment.is_home and name in REPLICA_ACTIONS:
            grants.grant(fn, REPLICA_ACTIONS[name], regional.own_control.table_arn)
        shard_tables = regional.shard_tables.items() if regional else [(own_region, storage.shard_tables)]
        everywhere = name in (c.FN_BROKER, c.FN_CONSUMER)  # the others work on their own region's shards
        arns = [
            t.table_arn
            for region, tables in shard_tables
            if everywhere or region == own_region
            for t in tables
        ]
        grants.grant(fn, SHARD_ACTIONS[name], *arns)

    broker = functions[c.FN_BROKER]
    ssm(broker, SSM_READ + SSM_WRITE + SSM_DELETE, every_region)
    broker.add_to_role_policy(  # the throttle wake (sluice/engine/wake.py): this function only
        iam.PolicyStatement(
            actions=["lambda:InvokeFunction"], resources=[functions[c.FN_COORDINATOR].function_arn]
        )
    )
    # Large bodies: written by sends, read back by redrive (the pull path, run by the broker). Payload-tier
    # objects: written by sends with their lifecycle tag, read back by redrive, peek and SQS receives.
    objects(broker, ("s3:PutObject", "s3:GetObject"), every_bucket, c.OVERFLOW_PREFIX, c.PAYLOAD_PREFIX)
    objects(broker, ("s3:PutObjectTagging",), every_bucket, c.PAYLOAD_PREFIX)

    consumer = functions[c.FN_CONSUMER]
    ssm(consumer, SSM_READ, [own_region])
    objects(consumer, ("s3:GetObject",), every_bucket, SEGMENTS_PREFIX, c.OVERFLOW_PREFIX, c.PAYLOAD_PREFIX)
    objects(consumer, ("s3:PutObject",), every_bucket, c.OVERFLOW_PREFIX, c.PAYLOAD_PREFIX)
    objects(consumer, ("s3:PutObjectTagging",), every_bucket, c.PAYLOAD_PREFIX)
    if push_lambda_targets:
        targets = push_target_arns(stack, push_lambda_targets)
        grants.grant(consumer, ("lambda:InvokeFunction",), *targets, why=PUSH_TARGETS_REASON)

    shard = functions[c.FN_SHARD]
    # Flush writes segments, compaction reads and rewrites them, retention deletes them: `segments/` only
    # (never `exports/`, Glue's output, nor `overflow/`, which expires by lifecycle rule).
    objects(shard, ("s3:GetObject", "s3:PutObject", "s3:DeleteObject"), [bucket], SEGMENTS_PREFIX)
    # The flush reads payload-tier objects into segments and deletes the orphans of sends that crashed
    # between their object and their items, found by listing the shard's part of `payload/` (only there).
    objects(shard, ("s3:GetObject", "s3:DeleteObject"), [bucket], c.PAYLOAD_PREFIX)
    # It reads bodies over the DynamoDB item limit too (`overflow/`, never deleted here: a lifecycle rule
    # does; tests/e2e/test_local_faults.py's flush of 1 MB messages is the call the audit records).
    objects(shard, ("s3:GetObject",), [bucket], c.OVERFLOW_PREFIX)
    shard.add_to_role_policy(
        iam.PolicyStatement(
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{c.PAYLOAD_PREFIX}*"]}},
        )
    )

    coordinator = functions[c.FN_COORDINATOR]
    ssm(coordinator, SSM_READ + SSM_WRITE, every_region)
    # It prunes its own region's mirrors of deleted queues (`QueueRegistry.prune_mirrors`), no others.
    ssm(coordinator, SSM_PRUNE, [own_region])
    grants.grant(
        coordinator,
        ("lambda:InvokeFunction",),
        consumer_alias.function_arn,
        functions[c.FN_SHARD].function_arn,
    )

    for fn in functions.values():
        assert fn.role is not None
        NagSuppressions.add_resource_suppressions(fn.role, grants.suppressions(fn), apply_to_children=True)
