"""Reading EventBridge schedules out of a template: rate, target function, input, time scale."""

from __future__ import annotations

import json

import pytest

from sluice import constants as c
from sluice.local.schedules import ScheduleError, rate_seconds, schedule_environment, schedules_from_template


def template(expression: str = "rate(2 minutes)", state: str = "ENABLED", target_input=None) -> dict:
    target = {"Arn": {"Fn::GetAtt": ["Coord", "Arn"]}, "Id": "T"}
    if target_input is not None:
        target["Input"] = json.dumps(target_input)
    return {
        "Resources": {
            "Coord": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Handler": c.FUNCTION_HANDLERS[c.FN_COORDINATOR],
                    "Environment": {"Variables": {c.ENV_COORDINATOR_PERIOD_SECONDS: "5", "OTHER": "x"}},
                },
            },
            "Rule": {
                "Type": "AWS::Events::Rule",
                "Properties": {
                    "ScheduleExpression": expression,
                    "State": state,
                    "Targets": [target, {"Arn": {"Ref": "SomeTopic"}, "Id": "N"}],
                },
            },
        }
    }


def test_rate_expressions():
    assert [
        rate_seconds(e) for e in ("rate(1 minute)", "rate(5 minutes)", "rate(1 hour)", "rate(2 days)")
    ] == [
        60,
        300,
        3600,
        172800,
    ]
    with pytest.raises(ScheduleError):
        rate_seconds("cron(0 * * * ? *)")


def test_a_rule_becomes_a_schedule_with_its_own_input_scaled_in_time():
    (schedule,) = schedules_from_template(template(target_input={"kind": "coordinator.run"}), time_scale=4)
    assert (schedule.rule, schedule.function, schedule.interval_seconds, schedule.event) == (
        "Rule",
        c.FN_COORDINATOR,
        30.0,
        {"kind": "coordinator.run"},
    )


def test_without_input_the_target_gets_eventbridges_envelope():
    (schedule,) = schedules_from_template(template())
    assert schedule.event["detail-type"] == "Scheduled Event" and schedule.event["source"] == "aws.events"


def test_disabled_rules_do_not_run_and_cron_is_refused():
    assert schedules_from_template(template(state="DISABLED")) == []
    with pytest.raises(ScheduleError):
        schedules_from_template(template(expression="cron(0 12 * * ? *)"))
    with pytest.raises(ScheduleError):
        schedules_from_template(template(), time_scale=0)


def test_cadence_environment_is_scaled_and_only_the_schedule_variables():
    assert schedule_environment(template(), time_scale=5) == {c.ENV_COORDINATOR_PERIOD_SECONDS: "1"}
