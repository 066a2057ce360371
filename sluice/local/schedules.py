"""EventBridge schedules as the synthesized template defines them, for `sluice local` to fire.

Every `AWS::Events::Rule` with a `ScheduleExpression` becomes a `Schedule`: which of our functions it
targets (found by the target's function resource and its handler), how often (`rate(...)`), and the
exact input it sends. The coordinator's cadence variables (`constants.SCHEDULE_ENV`) come from its
function's environment in the same template. `time_scale` divides every interval: local may run the
deployed schedules faster, never with other events. Pure standard library, no AWS calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from sluice import constants as c

_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


class ScheduleError(ValueError):
    """The template holds a schedule the local runtime cannot reproduce faithfully."""


@dataclass(frozen=True)
class Schedule:
    """One rule target: invoke `function` asynchronously with `event` every `interval_seconds`."""

    rule: str  # logical id
    function: str  # a key of constants.FUNCTION_HANDLERS
    interval_seconds: float
    event: dict[str, Any]


def rate_seconds(expression: str) -> float:
    """`rate(1 minute)` → 60.0. Cron expressions are refused: no rule of the stack uses one."""
    m = _RATE.match(expression.strip())
    if not m:
        raise ScheduleError(f"unsupported schedule expression {expression!r}: only rate(...) is reproduced")
    return float(int(m.group(1)) * _UNIT_SECONDS[m.group(2).rstrip("s")])


def _function_ids(resources: dict[str, Any]) -> dict[str, str]:
    """Logical id of each Lambda function → our function name, by its handler."""
    by_handler = {handler: name for name, handler in c.FUNCTION_HANDLERS.items()}
    return {
        lid: by_handler[res["Properties"]["Handler"]]
        for lid, res in resources.items()
        if res.get("Type") == "AWS::Lambda::Function"
        and res.get("Properties", {}).get("Handler") in by_handler
    }


def schedules_from_template(template: dict[str, Any], time_scale: float = 1.0) -> list[Schedule]:
    """Every enabled schedule rule's targets that are our functions, intervals divided by `time_scale`.
    A schedule the runtime cannot reproduce (cron) raises `ScheduleError` rather than run differently."""
    if time_scale <= 0:
        raise ScheduleError(f"time scale must be positive, got {time_scale}")
    resources = template.get("Resources", {})
    functions = _function_ids(resources)
    out = []
    for lid, res in sorted(resources.items()):
        props = res.get("Properties", {})
        if res.get("Type") != "AWS::Events::Rule" or "ScheduleExpression" not in props:
            continue
        if props.get("State", "ENABLED") != "ENABLED":
            continue
        interval = rate_seconds(props["ScheduleExpression"]) / time_scale
        for target in props.get("Targets", []):
            arn = target.get("Arn", {})
            ref = arn.get("Fn::GetAtt", [None])[0] if isinstance(arn, dict) else None
            if ref not in functions:
                continue  # not one of our functions (a topic, a queue...): nothing local to run
            event = json.loads(target["Input"]) if "Input" in target else _scheduled_event(lid)
            out.append(Schedule(lid, functions[ref], interval, event))
    return out


def _scheduled_event(rule: str) -> dict[str, Any]:
    """What EventBridge sends a target that has no input of its own (its envelope, in short)."""
    return {"version": "0", "detail-type": "Scheduled Event", "source": "aws.events", "resources": [rule]}


def schedule_environment(template: dict[str, Any], time_scale: float = 1.0) -> dict[str, str]:
    """The coordinator's cadence variables from its function in the template, divided by `time_scale`."""
    resources = template.get("Resources", {})
    for lid, name in _function_ids(resources).items():
        if name != c.FN_COORDINATOR:
            continue
        variables = resources[lid]["Properties"].get("Environment", {}).get("Variables", {})
        return {
            var: f"{float(variables[var]) / time_scale:g}"
            for var in c.SCHEDULE_ENV
            if isinstance(variables.get(var), str)
        }
    raise ScheduleError("the template has no coordinator function")
