"""The coordinator's schedule as synthesized: a one-minute rule whose input is a typed
`CoordinatorEvent`, and a cadence (tick, loop, shard flush and maintenance) from CDK context that ends
each run before the next rule firing and safely before the function's timeout."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_lambda_powertools.utilities.parser import parse

from lambdas.coordinator.handler import SAFETY_SECONDS
from sluice import constants as c
from sluice.events import CoordinatorEvent
from sluice.local.schedules import schedule_environment, schedules_from_template
from tests.infra.helpers import function_ids

pytestmark = pytest.mark.infra
RULE_SECONDS = c.COORDINATOR_SCHEDULE_MINUTES * 60


def coordinator_props(template: Any) -> dict[str, Any]:
    from aws_cdk.assertions import Match

    found = template.find_resources(
        "AWS::Lambda::Function",
        {"Properties": {"Handler": Match.exact(c.FUNCTION_HANDLERS[c.FN_COORDINATOR])}},
    )
    (props,) = [r["Properties"] for r in found.values()]
    return props


def test_the_rule_sends_a_typed_coordinator_event(template: Any, resources: dict[str, Any]) -> None:
    from aws_cdk.assertions import Match

    coordinator = function_ids(resources)[c.FN_COORDINATOR]
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": f"rate({c.COORDINATOR_SCHEDULE_MINUTES} minute)",
            "State": "ENABLED",
            "Targets": [
                Match.object_like(
                    {
                        "Arn": {"Fn::GetAtt": [coordinator, "Arn"]},
                        "Input": Match.any_value(),
                        "RetryPolicy": {"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60},
                    }
                )
            ],
        },
    )
    rules = template.find_resources("AWS::Events::Rule")
    (rule,) = [r["Properties"] for r in rules.values() if "ScheduleExpression" in r["Properties"]]
    (target,) = rule["Targets"]
    event = parse(event=json.loads(target["Input"]), model=CoordinatorEvent)  # what the handler does
    assert event == CoordinatorEvent()  # no overrides: the run takes its cadence from the environment


def test_the_coordinator_loops_every_tick_until_just_before_the_next_firing(template: Any) -> None:
    props = coordinator_props(template)
    env = props["Environment"]["Variables"]
    tick = float(env[c.ENV_COORDINATOR_PERIOD_SECONDS])
    loop = float(env[c.ENV_COORDINATOR_LOOP_SECONDS])
    assert tick == c.DEFAULT_COORDINATOR_TICK_SECONDS
    assert loop + tick == RULE_SECONDS  # runs follow each other, one tick apart at most
    assert loop + SAFETY_SECONDS <= props["Timeout"]  # the handler's own cap never cuts the loop short
    assert float(env[c.ENV_SHARD_FLUSH_SECONDS]) == c.DEFAULT_SHARD_FLUSH_SECONDS
    assert float(env[c.ENV_SHARD_MAINTENANCE_SECONDS]) == c.DEFAULT_SHARD_MAINTENANCE_SECONDS


def test_the_local_runtime_reads_the_same_schedule_back(cfn: dict[str, Any]) -> None:
    (schedule,) = schedules_from_template(cfn)
    assert (schedule.function, schedule.interval_seconds, schedule.event) == (
        c.FN_COORDINATOR,
        RULE_SECONDS,
        CoordinatorEvent().to_payload(),
    )
    scaled = schedules_from_template(cfn, time_scale=10)[0]
    assert scaled.interval_seconds == RULE_SECONDS / 10 and scaled.event == schedule.event
    env = schedule_environment(cfn, time_scale=10)
    assert set(env) == set(c.SCHEDULE_ENV)
    assert float(env[c.ENV_COORDINATOR_PERIOD_SECONDS]) == pytest.approx(
        c.DEFAULT_COORDINATOR_TICK_SECONDS / 10
    )


def test_cadence_comes_from_context() -> None:
    from aws_cdk.assertions import Template

    from app import build_app

    _, stack = build_app({"coordinator_tick_seconds": "2", "shard_flush_seconds": "30", "stage": "tick"})
    env = coordinator_props(Template.from_stack(stack))["Environment"]["Variables"]
    assert (env[c.ENV_COORDINATOR_PERIOD_SECONDS], env[c.ENV_COORDINATOR_LOOP_SECONDS]) == ("2", "58")
    assert env[c.ENV_SHARD_FLUSH_SECONDS] == "30"


def test_an_async_run_is_never_retried_nor_delivered_late(resources: dict[str, Any]) -> None:
    """Lambda retries a failed async run twice by default, and the retry would overlap the next run; the
    shard work and push workers the coordinator starts are started again by its next pass instead."""
    ids = function_ids(resources)
    configs = {
        r["Properties"]["FunctionName"]["Ref"]: r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::EventInvokeConfig"
    }
    assert configs.keys() == {ids[c.FN_COORDINATOR], ids[c.FN_SHARD], ids[c.FN_CONSUMER]}
    assert configs[ids[c.FN_COORDINATOR]]["Qualifier"] == configs[ids[c.FN_SHARD]]["Qualifier"] == "$LATEST"
    # Push workers start on the consumer's alias (`<name>:live`): the config is the alias's own.
    (alias,) = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::Lambda::Alias"
        and r["Properties"]["FunctionName"] == {"Ref": ids[c.FN_CONSUMER]}
    ]
    qualifier = configs[ids[c.FN_CONSUMER]]["Qualifier"]
    assert {"Ref": alias} in qualifier["Fn::Select"][1]["Fn::Split"]


def test_the_broker_knows_which_function_to_wake(resources: dict[str, Any]) -> None:
    ids = function_ids(resources)
    env = resources[ids[c.FN_BROKER]]["Properties"]["Environment"]["Variables"]
    assert env[c.ENV_COORDINATOR_FUNCTION] == {"Ref": ids[c.FN_COORDINATOR]}
