"""Small readers over the synthesized template's JSON."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sluice import constants as c


def of_type(resources: dict[str, Any], typ: str) -> dict[str, dict[str, Any]]:
    return {lid: r for lid, r in resources.items() if r["Type"] == typ}


def refs(value: Any) -> set[str]:
    """Logical ids referenced anywhere inside a template value (Ref / Fn::GetAtt), pseudo params excluded."""
    found: set[str] = set()
    if isinstance(value, dict):
        if "Ref" in value and not str(value["Ref"]).startswith("AWS::"):
            found.add(value["Ref"])
        if "Fn::GetAtt" in value:
            found.add(value["Fn::GetAtt"][0])
        for v in value.values():
            found |= refs(v)
    elif isinstance(value, list):
        for v in value:
            found |= refs(v)
    return found


def literal(value: Any) -> str:
    """Literal text of a value with intrinsic functions flattened (tokens become '<ref>')."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return sep.join(literal(p) for p in parts)
        if isinstance(value.get("Fn::Sub"), str):
            return value["Fn::Sub"]
        return "<ref>"
    if isinstance(value, list):
        return ",".join(literal(v) for v in value)
    return str(value)


def function_ids(resources: dict[str, Any]) -> dict[str, str]:
    """Sluice function name -> logical id, found by handler (not by generated id)."""
    by_handler = {h: name for name, h in c.FUNCTION_HANDLERS.items()}
    return {
        by_handler[r["Properties"]["Handler"]]: lid
        for lid, r in of_type(resources, "AWS::Lambda::Function").items()
        if r["Properties"].get("Handler") in by_handler
    }


def statements_for_role(resources: dict[str, Any], role_id: str) -> Iterator[dict[str, Any]]:
    for policy in of_type(resources, "AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"].get("Roles", []):
            yield from policy["Properties"]["PolicyDocument"]["Statement"]
    role = resources[role_id]["Properties"]
    assert not role.get("ManagedPolicyArns"), f"{role_id} has managed policies"
    for inline in role.get("Policies", []):
        yield from inline["PolicyDocument"]["Statement"]


def actions(statement: dict[str, Any]) -> list[str]:
    a = statement["Action"]
    return [a] if isinstance(a, str) else list(a)


def resource_list(statement: dict[str, Any]) -> list[Any]:
    r = statement["Resource"]
    return r if isinstance(r, list) else [r]


def synth_resources(context: dict[str, Any], outdir: str) -> tuple[Any, dict[str, Any]]:
    """A second stack with `context` (next to conftest.py's default one) and its template's Resources."""
    from aws_cdk.assertions import Template

    from app import build_app

    _, stack = build_app(context, outdir=outdir)
    return stack, Template.from_stack(stack).to_json()["Resources"]
