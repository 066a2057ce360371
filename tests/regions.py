"""Two-region deployments on the session's moto (which keeps regions apart) for the multi-region tests:
the deployed naming (the same table names in every region, a bucket per region), without a synthesis."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from sluice import constants as c
from sluice.adapters import aws
from sluice.settings import Settings


def create_key_table(ddb: Any, name: str) -> None:
    """A table of every Sluice table's key schema (`pk`/`sk`, strings), on demand."""
    ddb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": c.PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": c.SORT_KEY, "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": c.PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": c.SORT_KEY, "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def regional_settings(
    stage: str, regions: tuple[str, ...], endpoint_url: str | None = None, **extra: Any
) -> dict[str, Settings]:
    """Each region's Settings over a control table and one shard table named alike in every region and a
    bucket per region, created where missing (a module may call it again with the same stage)."""
    control, shard_tables = f"sluice-{stage}-control", [f"sluice-{stage}-shards-0"]
    buckets = {r: f"sluice-{stage}-segments-{r}" for r in regions}
    for region in regions:
        ddb = aws.client("dynamodb", endpoint_url, region)
        existing = set(ddb.list_tables()["TableNames"])
        for name in [control, *shard_tables]:
            if name not in existing:
                create_key_table(ddb, name)
        s3 = aws.client("s3", endpoint_url, region)
        try:
            s3.head_bucket(Bucket=buckets[region])
        except ClientError:
            located = region != "us-east-1"  # us-east-1 takes no location constraint
            where = {"CreateBucketConfiguration": {"LocationConstraint": region}} if located else {}
            s3.create_bucket(Bucket=buckets[region], **where)
    return {
        region: Settings(
            control_table=control,
            shard_tables=shard_tables,
            segment_bucket=buckets[region],
            shard_map_prefix=c.SHARD_MAP_PREFIX_TEMPLATE.format(stage=stage),
            aws_endpoint_url=endpoint_url,
            stage=stage,
            regions=list(regions),
            region=region,
            segment_buckets=buckets,
            **extra,
        )
        for region in regions
    }
