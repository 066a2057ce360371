"""Context configures the stack; strings from `-c key=value` are coerced."""

from __future__ import annotations

import pytest

from stacks.config import SluiceConfig

pytestmark = pytest.mark.infra


def test_defaults_need_no_context() -> None:
    cfg = SluiceConfig()
    cfg.validate()
    assert cfg.shard_table_count >= 1 and cfg.log_retention_days > 0


def test_route_throttles_name_routes_by_their_keys() -> None:
    cfg = SluiceConfig(
        api_route_throttles="POST /=5000:6000, POST  /v1/queues/{queue_name}/messages/pull=3000:3000"
    )
    assert cfg.route_throttles == {
        "POST /": (5000.0, 6000),
        "POST /v1/queues/{queue_name}/messages/pull": (3000.0, 3000),
    }


def test_context_strings_are_coerced() -> None:
    import aws_cdk as cdk

    app = cdk.App(
        context={"stage": "prod", "shard_table_count": "8", "retain_data": "false", "api_throttle_rate": "50"}
    )
    cfg = SluiceConfig.from_node(app.node)
    assert (cfg.stage, cfg.shard_table_count, cfg.retain_data, cfg.api_throttle_rate) == (
        "prod",
        8,
        False,
        50.0,
    )


@pytest.mark.parametrize(
    "bad",
    [
        {"shard_table_count": "0"},
        {"stage": "no spaces"},
        {"log_retention_days": "0"},
        {"coordinator_tick_seconds": "0.5"},
        {"coordinator_tick_seconds": "31"},
        {"shard_flush_seconds": "0"},
        {"broker_reserved_concurrency": "-1"},
        {"consumer_reserved_concurrency": "-5"},
        {"lambda_memory_mb": "64"},
        {"consumer_memory_mb": "100"},
        {"consumer_memory_mb": "20000"},
        {"api_route_throttles": "POST /nowhere=5000:5000"},
        {"api_route_throttles": "POST /=fast:5000"},
        {"api_route_throttles": "POST /=0:5000"},
    ],
)
def test_bad_context_is_rejected(bad: dict[str, str]) -> None:
    import aws_cdk as cdk

    (key,) = bad
    with pytest.raises(ValueError, match=key):
        SluiceConfig.from_node(cdk.App(context=bad).node)


def test_shard_table_count_context_changes_tables_and_environment() -> None:
    from aws_cdk.assertions import Template

    from app import build_app
    from sluice import constants as c

    _, stack = build_app({"shard_table_count": 2, "stage": "ctx"})
    template = Template.from_stack(stack)
    tables = template.find_resources("AWS::DynamoDB::Table")
    assert set(tables) == {c.LOGICAL_CONTROL_TABLE, "ShardTable0", "ShardTable1"}
    fns = template.find_resources("AWS::Lambda::Function")
    for fn in fns.values():
        env = fn["Properties"]["Environment"]["Variables"]
        assert env[c.ENV_SHARD_TABLES] == {
            "Fn::Join": [",", [{"Ref": "ShardTable0"}, {"Ref": "ShardTable1"}]]
        }
        assert env[c.ENV_STAGE] == "ctx"
