"""Tables, the segment bucket, and that every resource the code reads is defined."""

from __future__ import annotations

from typing import Any

import pytest

from sluice import constants as c
from tests.infra.helpers import of_type, refs

pytestmark = pytest.mark.infra


def expected_tables(stack: Any) -> list[str]:
    n = stack.config.shard_table_count
    return [c.LOGICAL_CONTROL_TABLE, *(f"{c.LOGICAL_SHARD_TABLE_PREFIX}{i}" for i in range(n))]


def test_every_table_and_bucket_the_code_reads_is_defined(resources: dict[str, Any], stack: Any) -> None:
    for lid in expected_tables(stack):
        assert resources[lid]["Type"] == "AWS::DynamoDB::Table", lid
    assert resources[c.LOGICAL_SEGMENT_BUCKET]["Type"] == "AWS::S3::Bucket"


def test_every_table_has_key_schema_billing_ttl_pitr_encryption(resources: dict[str, Any]) -> None:
    for props in (t["Properties"] for t in of_type(resources, "AWS::DynamoDB::Table").values()):
        check_table(props)


def check_table(props: dict[str, Any]) -> None:
    assert props["KeySchema"] == [
        {"AttributeName": c.PARTITION_KEY, "KeyType": "HASH"},
        {"AttributeName": c.SORT_KEY, "KeyType": "RANGE"},
    ]
    assert {(a["AttributeName"], a["AttributeType"]) for a in props["AttributeDefinitions"]} == {
        (c.PARTITION_KEY, "S"),
        (c.SORT_KEY, "S"),
    }
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["TimeToLiveSpecification"] == {"AttributeName": c.TTL_ATTRIBUTE, "Enabled": True}
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["SSESpecification"]["SSEEnabled"] is True


def test_bucket_encrypted_private_and_denies_plain_http(resources: dict[str, Any]) -> None:
    props = resources[c.LOGICAL_SEGMENT_BUCKET]["Properties"]
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    policies = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in of_type(resources, "AWS::S3::BucketPolicy").values()
        if refs(p["Properties"]["Bucket"]) == {c.LOGICAL_SEGMENT_BUCKET}
    ]
    (statements,) = policies
    assert any(
        s["Effect"] == "Deny"
        and s["Action"] == "s3:*"
        and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        and s["Principal"] == {"AWS": "*"}
        for s in statements
    )


def test_lifecycle_expires_scratch_and_overflow_only(resources: dict[str, Any]) -> None:
    rules = resources[c.LOGICAL_SEGMENT_BUCKET]["Properties"]["LifecycleConfiguration"]["Rules"]
    by_prefix = {r.get("Prefix"): r for r in rules}
    assert by_prefix[c.OVERFLOW_PREFIX]["ExpirationInDays"] == 15
    # Nothing under segments/ expires by rule: `segments/<queue>/` holds a queue's segments, so a scratch
    # prefix such as `segments/tmp/` would expire the segments of a queue named "tmp".
    assert not [r for r in rules if str(r.get("Prefix", "")).startswith("segments/")]
    # Nothing expires flushed segments wholesale: bottomless streams keep them.
    assert not any(r.get("ExpirationInDays") and r.get("Prefix") in (None, "", "segments/") for r in rules), (
        "a rule would expire bottomless segments"
    )


def test_payload_objects_expire_by_the_days_their_tag_names(resources: dict[str, Any]) -> None:
    rules = resources[c.LOGICAL_SEGMENT_BUCKET]["Properties"]["LifecycleConfiguration"]["Rules"]
    payload = [r for r in rules if r.get("Prefix") == c.PAYLOAD_PREFIX]
    days = {int(r["TagFilters"][0]["Value"]): r["ExpirationInDays"] for r in payload}
    assert days == {n: n for n in range(2, c.PAYLOAD_MAX_DAYS + 1)}
    assert all(r["TagFilters"][0]["Key"] == c.PAYLOAD_DAYS_TAG for r in payload)


def test_segment_bucket_logs_access(resources: dict[str, Any]) -> None:
    logging = resources[c.LOGICAL_SEGMENT_BUCKET]["Properties"]["LoggingConfiguration"]
    (target,) = refs(logging["DestinationBucketName"])
    assert resources[target]["Type"] == "AWS::S3::Bucket"
