"""Create Sluice's resources on an AWS endpoint (moto) and return the Settings that point at them."""

from __future__ import annotations

from sluice import constants as c
from sluice.adapters import aws
from sluice.settings import Settings


def provision(
    endpoint_url: str, stage: str = "local", shard_table_count: int = c.DEFAULT_SHARD_TABLE_COUNT
) -> Settings:
    """Tables, bucket and shard-map path of the stack, named for `stage`. Idempotent."""
    ddb = aws.client("dynamodb", endpoint_url)
    s3 = aws.client("s3", endpoint_url)
    control = f"sluice-{stage}-control"
    shards = [f"sluice-{stage}-shards-{i}" for i in range(shard_table_count)]
    existing = set(ddb.list_tables()["TableNames"])
    for name in [control, *shards]:
        if name in existing:
            continue
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
        ddb.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": c.TTL_ATTRIBUTE}
        )
    bucket = f"sluice-{stage}-segments"
    s3.create_bucket(Bucket=bucket)
    return Settings(
        control_table=control,
        shard_tables=shards,
        segment_bucket=bucket,
        shard_map_prefix=c.SHARD_MAP_PREFIX_TEMPLATE.format(stage=stage),
        aws_endpoint_url=endpoint_url,
        stage=stage,
    )
