"""Functions: runtime, layer, tracing, environment (what Settings.from_env reads), schedule."""

from __future__ import annotations

from typing import Any

import pytest

from sluice import constants as c
from sluice.settings import CoordinatorSettings, Settings
from stacks.functions import CODE_DIRS, POWERTOOLS_SSM_TEMPLATE, pinned_powertools_version, stage_code
from tests.infra.helpers import function_ids, literal, of_type, refs

pytestmark = pytest.mark.infra


class RecordingEnv(dict):
    """A mapping that records every variable read from it."""

    def __init__(self) -> None:
        super().__init__()
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)


def settings_env_vars() -> set[str]:
    env = RecordingEnv()
    with pytest.raises(ValueError):  # nothing set: validation fails, but every read is recorded
        Settings.from_env(env)
    return env.read


# Read by Settings but local-runtime only: on AWS the SDK's own endpoints are used, and push targets
# are never local webhooks.
LOCAL_ONLY = {c.ENV_AWS_ENDPOINT_URL, c.ENV_LAMBDA_ENDPOINT_URL, c.ENV_ALLOW_LOCAL_WEBHOOKS}
# Set on some functions only: the opt-in (CDK context) and the coordinator's cadence (the schedule's).
# Multi-region deployments only (tests/infra/test_regions.py checks them on every function there).
OPTIONAL = {c.ENV_OPEN_STREAM_PREFIX, c.ENV_REGIONS, c.ENV_REGION, c.ENV_SEGMENT_BUCKETS}
# The broker's only (tests/infra/test_schedule.py): what it wakes when its shards throttle.
OPTIONAL |= {c.ENV_COORDINATOR_FUNCTION}


def coordinator_env_vars() -> set[str]:
    env = RecordingEnv()
    CoordinatorSettings.from_env(env)
    return env.read


def test_every_settings_variable_is_set_on_every_function(resources: dict[str, Any]) -> None:
    wanted = settings_env_vars() - LOCAL_ONLY - OPTIONAL - coordinator_env_vars()
    assert c.ENV_CONTROL_TABLE in wanted and c.ENV_SHARD_TABLES in wanted
    for name, lid in function_ids(resources).items():
        env = resources[lid]["Properties"]["Environment"]["Variables"]
        assert wanted <= set(env), f"{name} lacks {wanted - set(env)}"
        assert not LOCAL_ONLY & set(env)
        assert env[c.ENV_POWERTOOLS_SERVICE_NAME] == c.SERVICE_NAME
        assert env[c.ENV_POWERTOOLS_METRICS_NAMESPACE] == c.METRICS_NAMESPACE


def test_environment_points_at_the_stacks_resources(resources: dict[str, Any], stack: Any) -> None:
    shard_ids = [f"{c.LOGICAL_SHARD_TABLE_PREFIX}{i}" for i in range(stack.config.shard_table_count)]
    for lid in function_ids(resources).values():
        env = resources[lid]["Properties"]["Environment"]["Variables"]
        assert env[c.ENV_CONTROL_TABLE] == {"Ref": c.LOGICAL_CONTROL_TABLE}
        assert env[c.ENV_SHARD_TABLES] == {"Fn::Join": [",", [{"Ref": s} for s in shard_ids]]}
        assert env[c.ENV_SEGMENT_BUCKET] == {"Ref": c.LOGICAL_SEGMENT_BUCKET}
        assert env[c.ENV_SHARD_MAP_PREFIX] == c.SHARD_MAP_PREFIX_TEMPLATE.format(stage=stack.config.stage)
        assert env[c.ENV_STAGE] == stack.config.stage
        # Resolved with names in place of tokens, the mapping is a valid Settings.
        resolved = {k: literal(v).replace("<ref>", "t") for k, v in env.items()}
        settings = Settings.from_env(resolved)
        assert len(settings.shard_tables) == len(shard_ids)


def test_coordinator_knows_consumer_and_shard_function_names(resources: dict[str, Any]) -> None:
    ids = function_ids(resources)
    env = resources[ids[c.FN_COORDINATOR]]["Properties"]["Environment"]["Variables"]
    # Push workers start on the consumer's SnapStart alias (`<name>:live`), not on $LATEST.
    assert literal(env[c.ENV_CONSUMER_FUNCTION]) == f"<ref>:{c.API_ALIAS}"
    assert refs(env[c.ENV_CONSUMER_FUNCTION]) == {ids[c.FN_CONSUMER]}
    assert env[c.ENV_SHARD_FUNCTION] == {"Ref": ids[c.FN_SHARD]}


def test_runtime_architecture_tracing_layer_logs(resources: dict[str, Any], cfn: dict[str, Any]) -> None:
    ids = function_ids(resources)
    assert set(ids) == set(c.FUNCTION_HANDLERS)
    codes = set()
    for lid in ids.values():
        props = resources[lid]["Properties"]
        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == ["arm64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        (layer,) = props["Layers"]
        param = cfn["Parameters"][layer["Ref"]]
        assert param["Type"] == "AWS::SSM::Parameter::Value<String>"
        assert param["Default"] == POWERTOOLS_SSM_TEMPLATE.format(version=pinned_powertools_version())
        log_group = resources[props["LoggingConfig"]["LogGroup"]["Ref"]]["Properties"]
        assert log_group["RetentionInDays"] >= 1
        codes.add(props["Code"]["S3Key"])
    assert len(codes) == 1, "all functions share one code asset"


def test_code_asset_holds_only_sluice_and_lambdas() -> None:
    staged = stage_code()
    assert sorted(p.name for p in staged.iterdir()) == sorted(CODE_DIRS)
    assert not list(staged.rglob("__pycache__"))
    for handler in c.FUNCTION_HANDLERS.values():
        package = handler.rsplit(".", 2)[0].replace(".", "/")
        assert (staged / package).is_dir(), package


def test_schedule_targets_the_coordinator(resources: dict[str, Any]) -> None:
    coordinator = function_ids(resources)[c.FN_COORDINATOR]
    rules = [
        r["Properties"]
        for r in of_type(resources, "AWS::Events::Rule").values()
        if r["Properties"].get("ScheduleExpression")
    ]
    minutes = c.COORDINATOR_SCHEDULE_MINUTES
    expected = f"rate({minutes} minute{'s' if minutes != 1 else ''})"
    (rule,) = [r for r in rules if any(refs(t["Arn"]) == {coordinator} for t in r["Targets"])]
    assert rule["ScheduleExpression"] == expected
    assert rule["State"] == "ENABLED"
    # Nothing triggers the shard function: only the coordinator invokes it.
    shard = function_ids(resources)[c.FN_SHARD]
    assert not any(shard in refs(t["Arn"]) for r in rules for t in r["Targets"])
    assert not of_type(resources, "AWS::Lambda::EventSourceMapping")


def alarm_metrics(alarm: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(namespace, metric name, dimensions) of an alarm, whether simple or metric-math."""
    if "MetricName" in alarm:
        dims = {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])}
        return [(alarm["Namespace"], alarm["MetricName"], dims)]
    out = []
    for m in alarm.get("Metrics", []):
        if "MetricStat" in m:
            metric = m["MetricStat"]["Metric"]
            dims = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            out.append((metric["Namespace"], metric["MetricName"], dims))
    return out


def test_alarms_watch_age_errors_and_throttles(resources: dict[str, Any]) -> None:
    metrics = [
        m
        for a in of_type(resources, "AWS::CloudWatch::Alarm").values()
        for m in alarm_metrics(a["Properties"])
    ]
    assert (c.METRICS_NAMESPACE, c.METRIC_OLDEST_MESSAGE_AGE, {"service": c.SERVICE_NAME}) in metrics
    errored = {d["FunctionName"]["Ref"] for ns, name, d in metrics if (ns, name) == ("AWS/Lambda", "Errors")}
    assert errored == set(function_ids(resources).values())
    for event in ("ReadThrottleEvents", "WriteThrottleEvents"):
        throttled = {
            d["TableName"]["Ref"] for ns, name, d in metrics if (ns, name) == ("AWS/DynamoDB", event)
        }
        assert throttled == set(of_type(resources, "AWS::DynamoDB::Table")), event
    assert of_type(resources, "AWS::CloudWatch::Dashboard")


def test_outputs(cfn: dict[str, Any]) -> None:
    assert {"ApiUrl", "SegmentBucketName"} <= set(cfn["Outputs"])
    assert refs(cfn["Outputs"]["SegmentBucketName"]["Value"]) == {c.LOGICAL_SEGMENT_BUCKET}


def test_memory_and_reserved_concurrency_are_per_function_and_opt_in(
    resources: dict[str, Any], tmp_path_factory: Any
) -> None:
    """By default every function has `lambda_memory_mb` and nothing reserved; the context gives the
    consumer (whose long-polls are billed for their wait) its own memory, and reserves executions for
    the broker, the consumer and the coordinator apart."""
    from tests.infra.helpers import synth_resources

    def props(res: dict[str, Any], key: str) -> dict[str, Any]:
        return {name: res[lid]["Properties"].get(key) for name, lid in function_ids(res).items()}

    assert set(props(resources, "ReservedConcurrentExecutions").values()) == {None}
    assert set(props(resources, "MemorySize").values()) == {c.DEFAULT_LAMBDA_MEMORY_MB}
    context = {
        "consumer_memory_mb": "256",
        "broker_reserved_concurrency": "200",
        "consumer_reserved_concurrency": "600",
        "coordinator_reserved_concurrency": "2",
    }
    _, opted = synth_resources(context, str(tmp_path_factory.mktemp("cdk.out.reserved")))
    assert props(opted, "ReservedConcurrentExecutions") == {
        c.FN_BROKER: 200,
        c.FN_CONSUMER: 600,
        c.FN_COORDINATOR: 2,
        c.FN_SHARD: None,
    }
    assert props(opted, "MemorySize") == {**dict.fromkeys(c.FUNCTION_HANDLERS, 1024), c.FN_CONSUMER: 256}
