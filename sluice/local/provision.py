"""Create Sluice's resources on an AWS endpoint (moto) from the synthesized stack template.

The local runtime provisions what the CDK stack defines, not a hand-written copy of it: every
`AWS::DynamoDB::Table` in the template (key schema, attribute types, billing mode, TTL) and the segment
bucket. Resources are named locally from their logical ids (`sluice.constants.LOGICAL_*`), as the stack
names them (the bucket's account and region are deploy-time values in the template):

    ControlTable   -> sluice-{stage}-control
    ShardTable{i}  -> sluice-{stage}-shards-{i}
    SegmentBucket  -> sluice-{stage}-segments-{account}-{region} (moto's account; bucket names are
                      global)
    LeaseKeySecret -> sluice/{stage}/lease-key (the deployed name), its value generated as the
                      template's GenerateSecretString says (Secrets Manager does it in AWS)
    other tables   -> sluice-{stage}-{logical id, lower case}
"""

from __future__ import annotations

import json
import re
import secrets
import string
from typing import Any

from botocore.exceptions import ClientError

from sluice import constants as c
from sluice.adapters import aws
from sluice.local.callaudit import LOCAL_ACCOUNT
from sluice.local.template import TemplateUnavailable, load_template
from sluice.settings import Settings

__all__ = ["TemplateUnavailable", "local_name", "provision", "tables_from_template"]

_SHARD_RE = re.compile(rf"^{re.escape(c.LOGICAL_SHARD_TABLE_PREFIX)}(\d+)$")


def local_name(stage: str, logical_id: str, *, account: str | None = None, region: str | None = None) -> str:
    """The name a resource gets locally: the stack's deterministic name (`constants.physical_name`)."""
    return c.physical_name(stage, logical_id, account=account, region=region)


TABLE_TYPES = ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable")


def tables_from_template(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Logical id -> Properties of every DynamoDB table in the template. A multi-region home stack's
    control table is an `AWS::DynamoDB::GlobalTable` (its `Replicas` name every region that holds a
    copy); its key schema, attributes, billing mode and TTL have the same shape as a plain table's."""
    return {
        lid: res.get("Properties", {})
        for lid, res in template.get("Resources", {}).items()
        if res.get("Type") in TABLE_TYPES
    }


def provision(
    endpoint_url: str | None,
    stage: str = "local",
    shard_table_count: int = c.DEFAULT_SHARD_TABLE_COUNT,
    *,
    template: dict[str, Any] | None = None,
    region: str | None = None,
) -> Settings:
    """Tables, bucket and shard-map path of the stack, named for `stage`, in `region` (None: the
    process's own). Idempotent.

    `template` defaults to the cached synthesized template (synthesized with `shard_table_count` shard
    tables if missing or stale); raises `TemplateUnavailable` with the reason if it cannot be produced.
    """
    if template is None:
        context = (
            None
            if shard_table_count == c.DEFAULT_SHARD_TABLE_COUNT
            else {"shard_table_count": shard_table_count}
        )
        template = load_template(context)
    tables = tables_from_template(template)
    shard_ids = sorted(
        (lid for lid in tables if _SHARD_RE.match(lid)),
        key=lambda lid: int(lid[len(c.LOGICAL_SHARD_TABLE_PREFIX) :]),
    )
    if c.LOGICAL_CONTROL_TABLE not in tables or len(shard_ids) < shard_table_count:
        raise TemplateUnavailable(
            f"the template defines {c.LOGICAL_CONTROL_TABLE}: {c.LOGICAL_CONTROL_TABLE in tables} and "
            f"{len(shard_ids)} shard tables; {shard_table_count} were asked for"
        )
    resources = template.get("Resources", {})
    for needed in (c.LOGICAL_SEGMENT_BUCKET, c.LOGICAL_LEASE_KEY_SECRET):
        if needed not in resources:
            raise TemplateUnavailable(f"the template has no {needed}")
    wanted_shards = set(shard_ids[:shard_table_count])

    ddb = aws.client("dynamodb", endpoint_url, region)
    existing = set(ddb.list_tables()["TableNames"])
    for lid, props in tables.items():
        if _SHARD_RE.match(lid) and lid not in wanted_shards:
            continue
        name = local_name(stage, lid)
        if name not in existing:
            _create_table(ddb, name, props)

    s3 = aws.client("s3", endpoint_url, region)
    # One bucket per account and region, named as the stack names it (S3 names are global).
    bucket = local_name(
        stage, c.LOGICAL_SEGMENT_BUCKET, account=LOCAL_ACCOUNT, region=region or s3.meta.region_name
    )
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError:
        region = s3.meta.region_name
        extra = (
            {}
            if region in (None, "us-east-1")
            else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        )
        s3.create_bucket(Bucket=bucket, **extra)

    lease_key_secret = _ensure_secret(
        aws.client("secretsmanager", endpoint_url, region),
        local_name(stage, c.LOGICAL_LEASE_KEY_SECRET),
        resources[c.LOGICAL_LEASE_KEY_SECRET].get("Properties", {}),
    )
    return Settings(
        control_table=local_name(stage, c.LOGICAL_CONTROL_TABLE),
        shard_tables=[local_name(stage, lid) for lid in shard_ids[:shard_table_count]],
        segment_bucket=bucket,
        shard_map_prefix=c.SHARD_MAP_PREFIX_TEMPLATE.format(stage=stage),
        aws_endpoint_url=endpoint_url,
        stage=stage,
        lease_key_secret=lease_key_secret,
    )


def _ensure_secret(sm: Any, name: str, props: dict[str, Any]) -> str:
    """The secret's ARN; created once with a value generated as `GenerateSecretString` describes."""
    try:
        return sm.describe_secret(SecretId=name)["ARN"]
    except ClientError as exc:
        if aws.error_code(exc) != "ResourceNotFoundException":
            raise
    spec = props["GenerateSecretString"]
    alphabet = string.ascii_letters + string.digits
    if not spec.get("ExcludePunctuation"):
        alphabet += string.punctuation
    doc = json.loads(spec["SecretStringTemplate"])
    doc[spec["GenerateStringKey"]] = "".join(secrets.choice(alphabet) for _ in range(spec["PasswordLength"]))
    return sm.create_secret(Name=name, SecretString=json.dumps(doc))["ARN"]


def _create_table(ddb: Any, name: str, props: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {
        "TableName": name,
        "KeySchema": props["KeySchema"],
        "AttributeDefinitions": props["AttributeDefinitions"],
        "BillingMode": props.get("BillingMode", "PROVISIONED"),
    }
    if kwargs["BillingMode"] == "PROVISIONED":
        kwargs["ProvisionedThroughput"] = props.get(
            "ProvisionedThroughput", {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
        )
    for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        if key in props:
            kwargs[key] = props[key]
    ddb.create_table(**kwargs)
    ttl = props.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        ddb.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]}
        )
