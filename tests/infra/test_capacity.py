"""`-c capacity=provisioned`: shard tables get provisioned capacity with target-tracking autoscaling
(the control table stays on demand); cdk-nag stays clean; bad settings are refused at synth.

A second stack is built once for this module, next to the default (on-demand) one of conftest.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from sluice import constants as c
from tests.infra.helpers import of_type, refs, synth_resources

pytestmark = pytest.mark.infra

CONTEXT = {
    "capacity": "provisioned",
    "shard_table_count": "2",
    "capacity_min_write": "10",
    "capacity_max_write": "800",
    "capacity_min_read": "5",
    "capacity_max_read": "300",
    "capacity_target_utilization": "60",
}


@pytest.fixture(scope="module")
def provisioned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any]]:
    return synth_resources(CONTEXT, str(tmp_path_factory.mktemp("cdk.out.provisioned")))


def _shard_ids(n: int) -> list[str]:
    return [f"{c.LOGICAL_SHARD_TABLE_PREFIX}{i}" for i in range(n)]


def test_shard_tables_are_provisioned_at_the_minimum_and_the_control_table_stays_on_demand(provisioned):
    _, resources = provisioned
    for lid in _shard_ids(2):
        props = resources[lid]["Properties"]
        assert props.get("BillingMode", "PROVISIONED") == "PROVISIONED"
        assert props["ProvisionedThroughput"] == {"ReadCapacityUnits": 5, "WriteCapacityUnits": 10}
        assert props["TimeToLiveSpecification"]["AttributeName"] == c.TTL_ATTRIBUTE  # the rest unchanged
        assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert resources[c.LOGICAL_CONTROL_TABLE]["Properties"]["BillingMode"] == "PAY_PER_REQUEST"


def test_every_shard_table_scales_reads_and_writes_on_utilization(provisioned):
    _, resources = provisioned
    targets = of_type(resources, "AWS::ApplicationAutoScaling::ScalableTarget")
    found = {}
    for lid, target in targets.items():
        props = target["Properties"]
        (table,) = refs(props["ResourceId"]) & set(_shard_ids(2))
        found[(table, props["ScalableDimension"])] = (props["MinCapacity"], props["MaxCapacity"], lid)
    for table in _shard_ids(2):
        assert found[(table, "dynamodb:table:WriteCapacityUnits")][:2] == (10, 800)
        assert found[(table, "dynamodb:table:ReadCapacityUnits")][:2] == (5, 300)
    policies = of_type(resources, "AWS::ApplicationAutoScaling::ScalingPolicy")
    assert len(policies) == 4
    by_target = {refs(p["Properties"]["ScalingTargetId"]).pop(): p["Properties"] for p in policies.values()}
    for _min, _max, target_id in found.values():
        policy = by_target[target_id]
        assert policy["PolicyType"] == "TargetTrackingScaling"
        config = policy["TargetTrackingScalingPolicyConfiguration"]
        assert config["TargetValue"] == 60
        assert config["PredefinedMetricSpecification"]["PredefinedMetricType"] in (
            "DynamoDBWriteCapacityUtilization",
            "DynamoDBReadCapacityUtilization",
        )


def test_on_demand_stays_the_default(resources: dict[str, Any]) -> None:
    assert not of_type(resources, "AWS::ApplicationAutoScaling::ScalableTarget")
    for lid in _shard_ids(1):
        assert resources[lid]["Properties"]["BillingMode"] == "PAY_PER_REQUEST"


def test_cdk_nag_finds_nothing_unsuppressed_in_provisioned_mode(provisioned):
    from aws_cdk.assertions import Annotations, Match

    stack, _ = provisioned
    nag = Match.string_like_regexp("AwsSolutions-.*")
    Annotations.from_stack(stack).has_no_error("*", nag)
    Annotations.from_stack(stack).has_no_warning("*", nag)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"capacity": "reserved"}, "capacity must be"),
        ({"capacity_min_write": "0"}, "capacity_min_write"),
        ({"capacity_min_read": "50", "capacity_max_read": "10"}, "capacity_min_read"),
        ({"capacity_target_utilization": "95"}, "capacity_target_utilization"),
    ],
)
def test_bad_capacity_settings_are_refused(bad: dict[str, str], message: str) -> None:
    import aws_cdk as cdk

    from stacks.config import SluiceConfig

    app = cdk.App(context={"capacity": "provisioned", **bad})
    with pytest.raises(ValueError, match=message):
        SluiceConfig.from_node(app.node)
