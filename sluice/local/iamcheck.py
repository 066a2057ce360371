"""Check recorded AWS calls (`sluice.local.callaudit`) against each function's role in the template.

moto enforces IAM actions only (a policy naming a specific ARN is denied even for that ARN), so this
evaluates the synthesized policies itself: for each recorded (function, action, resource ARN) it finds
the function's role in the template synthesized for the stage the call ran under, resolves the
statements' intrinsics (Ref, Fn::GetAtt, Fn::Join, Fn::Sub, Fn::Select, Fn::Split) against the local
region, account and resource names (`sluice.local.provision.local_name`), and applies IAM's rules:
an explicit Deny wins, else some Allow must match the action and the resource (`*` and `?`
wildcards; actions case-insensitive). A statement's Condition is evaluated over the condition keys the
audit records with a call (`callaudit.condition_keys`: an S3 listing's `s3:prefix`) for StringLike and
StringEquals; any other condition, or a key the call does not carry, does not grant, so the check errs
towards reporting a denial. The unused-grant check leaves conditioned statements out.

Multi-region runs: a record may carry `caller_region` (the region of the function that made the call,
its SLUICE_REGION) and `regions` (the deployment's SLUICE_REGIONS, home first). Such a call is judged
by the role in the caller's region's template (`SluiceStack-<caller_region>`, synthesized with
`-c regions=...`), with intrinsics resolved in the caller's region: a call from eu-west-1 to a table
in us-east-1 is allowed only if the eu-west-1 role grants that us-east-1 ARN. Resources the template
names (multi-region: tables, buckets and the secret have fixed names) resolve to those names.

Usage: python -m sluice.local.iamcheck CALLS.jsonl   (exit 1 and a report when a call is denied)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from sluice import constants as c
from sluice.local.callaudit import LOCAL_ACCOUNT, PARTITION
from sluice.local.provision import local_name

UNRESOLVED = "\x00unresolved"  # never matches a call's ARN
# The property holding a resource's physical name when the template sets one (multi-region stacks);
# without it the resource is named as the local runtime names it.
NAMED_BY = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::DynamoDB::GlobalTable": "TableName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::SecretsManager::Secret": "Name",
}


@dataclass(frozen=True)
class Call:
    function: str
    stage: str
    action: str
    resource: str
    region: str = "us-east-1"  # where the call went (the resource's region)
    caller_region: str | None = None  # multi-region: the calling function's region
    regions: str | None = None  # multi-region: the deployment's regions, comma-separated, home first
    s3_prefix: str | None = None  # an S3 listing's prefix (condition key s3:prefix)

    @property
    def context(self) -> dict[str, str]:
        """The request's condition keys, as IAM names them."""
        return {} if self.s3_prefix is None else {"s3:prefix": self.s3_prefix}

    @property
    def role_region(self) -> str:
        """The region whose stack holds the calling function's role."""
        return self.caller_region or self.region


@dataclass(frozen=True)
class Denial:
    call: Call
    role: str

    def __str__(self) -> str:
        return f"{self.call.function} ({self.role}): {self.call.action} on {self.call.resource}"


def load_calls(path: Path) -> list[Call]:
    calls = []
    for line in path.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            calls.append(
                Call(
                    rec["function"],
                    rec["stage"],
                    rec["action"],
                    rec["resource"],
                    rec["region"],
                    rec.get("caller_region"),
                    rec.get("regions"),
                    rec.get("s3:prefix"),
                )
            )
    return list(dict.fromkeys(calls))  # each process writes a call once; several processes may repeat it


class TemplateRoles:
    """The template's functions and their roles' statements, resolved for one stage and region."""

    def __init__(self, template: dict[str, Any], stage: str, region: str = "us-east-1") -> None:
        self.resources: dict[str, Any] = template.get("Resources", {})
        self.parameters: dict[str, Any] = template.get("Parameters", {})
        self.stage = stage
        self.region = region
        by_handler = {h: name for name, h in c.FUNCTION_HANDLERS.items()}
        self.functions = {
            by_handler[r["Properties"]["Handler"]]: lid
            for lid, r in self.resources.items()
            if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") in by_handler
        }

    # -- intrinsic functions ------------------------------------------------------------------
    def resolve(self, value: Any) -> Any:
        if isinstance(value, str | int | float | bool) or value is None:
            return value
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if len(value) != 1:
            return {k: self.resolve(v) for k, v in value.items()}
        ((fn, arg),) = value.items()
        if fn == "Ref":
            return self._ref(arg)
        if fn == "Fn::GetAtt":
            lid, attr = arg if isinstance(arg, list) else arg.split(".", 1)
            return self._get_att(lid, attr)
        if fn == "Fn::Join":
            sep, parts = arg
            return str(sep).join(str(self.resolve(p)) for p in self.resolve(parts))
        if fn == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else arg
            return self._sub(text, {k: self.resolve(v) for k, v in variables.items()})
        if fn == "Fn::Select":
            index, items = arg
            return self.resolve(items)[int(self.resolve(index))]
        if fn == "Fn::Split":
            sep, text = arg
            return str(self.resolve(text)).split(sep)
        return {fn: self.resolve(arg)}

    def _sub(self, text: str, variables: dict[str, Any]) -> str:
        def one(m: re.Match[str]) -> str:
            name = m.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                return str(self._get_att(*name.split(".", 1)))
            return str(self._ref(name))

        return re.sub(r"\$\{([^}!]+)\}", one, text)

    def _ref(self, name: str) -> str:
        pseudo = {
            "AWS::Region": self.region,
            "AWS::AccountId": LOCAL_ACCOUNT,
            "AWS::Partition": PARTITION,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NoValue": "",
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            return str(self.parameters[name].get("Default", UNRESOLVED))
        if self.resources.get(name, {}).get("Type") == "AWS::Lambda::Alias":
            # An alias's Ref is its ARN: the function's ARN qualified with the alias name.
            props = self.resources[name]["Properties"]
            function = self.resolve(props["FunctionName"])
            return f"arn:{PARTITION}:lambda:{self.region}:{LOCAL_ACCOUNT}:function:{function}:{props['Name']}"
        if self.resources.get(name, {}).get("Type") == "AWS::SecretsManager::Secret":
            # A secret's Ref is its ARN: the name plus the six random characters Secrets Manager adds.
            secret = f"secret:{self._name(name)}-??????"
            return f"arn:{PARTITION}:secretsmanager:{self.region}:{LOCAL_ACCOUNT}:{secret}"
        return self._name(name)

    def _name(self, lid: str) -> str:
        res = self.resources.get(lid)
        if res is None:
            return UNRESOLVED
        props = res.get("Properties", {})
        typ = res["Type"]
        if typ in NAMED_BY:
            named = props.get(NAMED_BY[typ])
            return str(self.resolve(named)) if named is not None else local_name(self.stage, lid)
        if typ == "AWS::Lambda::Function":
            return str(self.resolve(props.get("FunctionName", lid)))
        if typ == "AWS::Logs::LogGroup":
            return str(self.resolve(props.get("LogGroupName", lid)))
        return lid

    def _get_att(self, lid: str, attr: str) -> str:
        res = self.resources.get(lid)
        if res is None or attr != "Arn":
            return UNRESOLVED
        name = self._name(lid)
        arn = f"arn:{PARTITION}:{{}}:{self.region}:{LOCAL_ACCOUNT}:{{}}"
        return {
            "AWS::DynamoDB::Table": arn.format("dynamodb", f"table/{name}"),
            "AWS::DynamoDB::GlobalTable": arn.format("dynamodb", f"table/{name}"),
            "AWS::S3::Bucket": f"arn:{PARTITION}:s3:::{name}",
            "AWS::Lambda::Function": arn.format("lambda", f"function:{name}"),
            "AWS::Logs::LogGroup": arn.format("logs", f"log-group:{name}:*"),
        }.get(res["Type"], UNRESOLVED)

    # -- roles ----------------------------------------------------------------------------------
    def role_of(self, function: str) -> str | None:
        lid = self.functions.get(function)
        if lid is None:
            return None
        role = self.resources[lid]["Properties"].get("Role", {})
        return role.get("Fn::GetAtt", [None])[0] if isinstance(role, dict) else None

    def statements(self, role_id: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for res in self.resources.values():
            if res["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in res["Properties"].get("Roles", []):
                found += res["Properties"]["PolicyDocument"]["Statement"]
        for inline in self.resources[role_id]["Properties"].get("Policies", []):
            found += inline["PolicyDocument"]["Statement"]
        return [self.resolve(s) for s in found]

    def function_name(self, function: str) -> str | None:
        lid = self.functions.get(function)
        return self._name(lid) if lid else None


def _matches(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    regex = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")
    return re.fullmatch(regex, value, re.IGNORECASE if ignore_case else 0) is not None


def _listed(statement: dict[str, Any], key: str) -> list[str] | None:
    value = statement.get(key)
    if value is None:
        return None
    return [str(v) for v in (value if isinstance(value, list) else [value])]


def statement_applies(statement: dict[str, Any], action: str, resource: str) -> bool:
    actions, not_actions = _listed(statement, "Action"), _listed(statement, "NotAction")
    if actions is not None and not any(_matches(a, action, ignore_case=True) for a in actions):
        return False
    if not_actions is not None and any(_matches(a, action, ignore_case=True) for a in not_actions):
        return False
    resources, not_resources = _listed(statement, "Resource"), _listed(statement, "NotResource")
    if resources is not None and not any(_matches(r, resource) for r in resources):
        return False
    return not (not_resources is not None and any(_matches(r, resource) for r in not_resources))


def condition_holds(condition: dict[str, Any], context: dict[str, str]) -> bool:
    """IAM's StringLike / StringEquals over the call's condition keys (every key and operator must hold;
    an operator not evaluated here, or a key the call lacks, does not)."""
    for operator, tests in condition.items():
        if operator not in ("StringLike", "StringEquals"):
            return False
        for key, wanted in tests.items():
            value = context.get(key)
            patterns = [str(w) for w in (wanted if isinstance(wanted, list) else [wanted])]
            if value is None:
                return False
            if operator == "StringLike" and not any(_matches(p, value) for p in patterns):
                return False
            if operator == "StringEquals" and value not in patterns:
                return False
    return True


def allowed(
    statements: Iterable[dict[str, Any]], action: str, resource: str, context: dict[str, str] | None = None
) -> bool:
    statements = list(statements)
    for s in statements:
        if s.get("Effect") == "Deny" and statement_applies(s, action, resource):
            return False
    return any(
        s.get("Effect") == "Allow"
        and condition_holds(s.get("Condition", {}), context or {})
        and statement_applies(s, action, resource)
        for s in statements
    )


def canonical_resource(call: Call, roles: TemplateRoles) -> str:
    """The local runtime invokes functions by short name (`shard`, `sluice-local-shard`, qualified
    `consumer:live`); in AWS the same call names the stack's function, so the ARN is checked with the
    stack's name for it (and the same qualifier)."""
    if call.action.lower() != "lambda:invokefunction":
        return call.resource
    head, _, name = call.resource.rpartition("function:")
    short, colon, qualifier = name.removeprefix("sluice-local-").partition(":")
    if short in c.FUNCTION_HANDLERS:
        real = roles.function_name(short)
        if real:
            return f"{head}function:{real}{colon}{qualifier}"
    return call.resource


def check(calls: Iterable[Call], template_for_stage: Callable[..., dict[str, Any]]) -> list[Denial]:
    """Every call the deployed role of its function would deny. `template_for_stage(stage)` gives a
    single-region stage's template; for multi-region calls it is called as
    `template_for_stage(stage, regions, caller_region)` (see `template_for_stage` below)."""
    views: dict[tuple[str, str | None, str], TemplateRoles] = {}
    statements: dict[tuple[str, str | None, str, str], list[dict[str, Any]]] = {}
    denials = []
    for call in calls:
        where = (call.stage, call.regions, call.role_region)
        view = views.get(where)
        if view is None:
            template = (
                template_for_stage(call.stage, call.regions, call.role_region)
                if call.regions
                else template_for_stage(call.stage)
            )
            view = views[where] = TemplateRoles(template, call.stage, call.role_region)
        role = view.role_of(call.function)
        if role is None:
            denials.append(Denial(call, "<no function in the template>"))
            continue
        key = (*where, role)
        if key not in statements:
            statements[key] = view.statements(role)
        if not allowed(statements[key], call.action, canonical_resource(call, view), call.context):
            denials.append(Denial(call, role))
    return denials


# -- grants no call used --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Grant:
    """One action on one kind of resource that an Allow statement of a function's role gives. The
    resource is written as a kind, the same in every stage and region: `<stage>`, `<account>`,
    `<region>`, `<i>` (a shard table's index) for the parts that vary, and without a trailing `/*` or
    `:*` (a path and what is below it, a function and its versions, are one kind)."""

    function: str
    action: str
    resource: str

    def __str__(self) -> str:
        return f"{self.function}: {self.action} on {self.resource}"


@dataclass(frozen=True)
class Unexercised:
    """A grant no call in the suite makes, on purpose: the calls are made outside the handlers' AWS
    clients, so the IAM call audit cannot see them. `function`, `action` and `resource` are patterns
    (`*` wildcards) over `Grant`'s fields."""

    function: str
    action: str
    resource: str
    reason: str

    def covers(self, grant: Grant) -> bool:
        return (
            _matches(self.function, grant.function)
            and _matches(self.action, grant.action, ignore_case=True)
            and _matches(self.resource, grant.resource)
        )


# Grants the suite's handler runs do not use, each with why it stays. The first two are calls no handler
# code makes; the others are code paths the suite exercises below the handlers only (engine tests, not
# attributed to a function): a test through the handler lets an entry go (a stale entry fails too).
UNEXERCISED: tuple[Unexercised, ...] = (
    Unexercised(
        "*",
        "logs:*",
        "*",
        "Lambda itself writes the function's logs (CreateLogStream, PutLogEvents) to its log group.",
    ),
    Unexercised(
        "*",
        "xray:*",
        "*",
        "Active tracing: Lambda's X-Ray daemon sends the segments (PutTraceSegments, PutTelemetryRecords).",
    ),
    Unexercised(
        "*",
        "ssm:GetParameters",
        "*:parameter/sluice/<stage>/shard-maps",
        "A shard map too large for one parameter is split and its parts read back with GetParameters "
        "(sluice/adapters/ssm.py); the maps of the suite's handler runs fit one parameter.",
    ),
    Unexercised(
        "broker",
        "lambda:InvokeFunction",
        "*:function:sluice-<stage>-coordinator",
        "The throttle wake (sluice/engine/wake.py) invokes the coordinator when every shard refuses a "
        "send; moto's DynamoDB never throttles, so it is tested on the engine with a throttling store "
        "(tests/integration/test_map_versions.py), not through the broker handler.",
    ),
    Unexercised(
        "coordinator",
        "ssm:DeleteParameters",
        "*:parameter/sluice/<stage>/shard-maps",
        "Pruning a mirror a deleted queue left in a region that was down (QueueRegistry.prune_mirrors) "
        "is tested on the engine (tests/integration/test_coordinator.py), not through the handler.",
    ),
    Unexercised(
        "shard",
        "dynamodb:BatchWriteItem",
        "*:table/sluice-<stage>-shards-<i>",
        "Retention deletes the expired items of a non-bottomless queue in batches (ShardWorker); the "
        "suite tests retention on the engine, not through the shard handler.",
    ),
    Unexercised(
        "shard",
        "s3:DeleteObject",
        "*:::sluice-<stage>-segments-<account>-<region>/payload",
        "The flush deletes the payload-tier objects of sends that crashed between their object and their "
        "items (sluice/engine/payloads.py orphans_in); crashes are injected on the engine "
        "(tests/faults/test_payload_tier_crashes.py), not through the shard handler.",
    ),
)


def _kind(resource: str, stage: str, regions: Iterable[str]) -> str:
    for region in sorted(set(regions), key=len, reverse=True):
        resource = resource.replace(region, "<region>")
    resource = resource.replace(LOCAL_ACCOUNT, "<account>")
    resource = resource.replace(f"sluice-{stage}-", "sluice-<stage>-").replace(
        f"sluice/{stage}/", "sluice/<stage>/"
    )
    resource = re.sub(r"shards-\d+", "shards-<i>", resource)
    return re.sub(r"(/\*|:\*)$", "", resource)


def _allows(statement: dict[str, Any]) -> list[tuple[str, str]]:
    if statement.get("Effect") != "Allow" or "Condition" in statement:
        return []
    actions, resources = _listed(statement, "Action") or [], _listed(statement, "Resource") or []
    return [(a, r) for a in actions for r in resources]


def unused(
    calls: Iterable[Call],
    template_for_stage: Callable[..., dict[str, Any]],
    expected: Iterable[Unexercised] = UNEXERCISED,
) -> tuple[list[Grant], list[Unexercised]]:
    """Grants of the roles the calls ran under that no call used, and `expected` entries that excuse
    nothing (stale: the grant is gone or a call uses it now). A grant (function, action, kind of
    resource) counts as used when some call of its function, in any stage or region, matches the action
    and one of the resources of that kind; templates are the ones `check` reads. Only meaningful for
    the calls of the whole suite."""
    calls = list(calls)
    by_view: dict[tuple[str, str | None, str], list[Call]] = {}
    for call in calls:
        by_view.setdefault((call.stage, call.regions, call.role_region), []).append(call)
    used: dict[Grant, bool] = {}
    for (stage, regions, role_region), view_calls in by_view.items():
        template = template_for_stage(stage, regions, role_region) if regions else template_for_stage(stage)
        view = TemplateRoles(template, stage, role_region)
        for function in view.functions:
            role = view.role_of(function)
            if role is None:
                continue
            mine = [(c.action, canonical_resource(c, view)) for c in view_calls if c.function == function]
            for statement in view.statements(role):
                for action, resource in _allows(statement):
                    where = [role_region, *(regions or "").split(",")]
                    grant = Grant(function, action, _kind(resource, stage, [r for r in where if r]))
                    hit = any(
                        _matches(action, a, ignore_case=True) and _matches(resource, r) for a, r in mine
                    )
                    used[grant] = used.get(grant, False) or hit
    expected = list(expected)
    idle = [g for g, hit in used.items() if not hit]
    unexplained = sorted((g for g in idle if not any(e.covers(g) for e in expected)), key=str)
    stale = [e for e in expected if not any(e.covers(g) for g in idle)]
    return unexplained, stale


def unused_report(unexplained: list[Grant], stale: list[Unexercised], limit: int = 60) -> str:
    lines = [
        f"IAM grants no call used: {len(unexplained)} not in the allow-list "
        f"(sluice/local/iamcheck.py UNEXERCISED); {len(stale)} allow-list entries excuse nothing"
    ]
    lines += [f"  UNUSED {g}" for g in unexplained[:limit]]
    if len(unexplained) > limit:
        lines.append(f"  ... and {len(unexplained) - limit} more")
    lines += [f"  STALE ALLOW-LIST ENTRY {e.function}: {e.action} on {e.resource}" for e in stale]
    return "\n".join(lines)


def template_for_stage(stage: str, regions: str | None = None, region: str | None = None) -> dict[str, Any]:
    """The template `cdk synth -c stage=<stage>` writes (cached by `sluice.local.template`); with
    `regions`, the template of `region` that `cdk synth -c stage=<stage> -c regions=<regions>` writes."""
    return _template(stage, regions, region)


@lru_cache(maxsize=8)
def _template(stage: str, regions: str | None, region: str | None) -> dict[str, Any]:
    from sluice.local.template import load_template

    context = {} if stage in ("", c.DEFAULT_STAGE) else {"stage": stage}
    if regions:
        context["regions"] = regions
    return load_template(context or None, region if regions else None)


def report(calls: list[Call], denials: list[Denial], limit: int = 40) -> str:
    functions = sorted({call.function for call in calls})
    lines = [
        f"IAM call audit: {len(calls)} distinct calls by {len(functions)} functions "
        f"({', '.join(functions)}); {len(denials)} would be denied by the stack's roles"
    ]
    lines += [f"  DENIED {d}" for d in denials[:limit]]
    if len(denials) > limit:
        lines.append(f"  ... and {len(denials) - limit} more")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sluice.local.iamcheck")
    parser.add_argument("calls", type=Path, help="the JSON-lines file SLUICE_IAM_AUDIT_FILE named")
    args = parser.parse_args(argv)
    calls = load_calls(args.calls)
    denials = check(calls, template_for_stage)
    print(report(calls, denials))
    return 1 if denials else 0


if __name__ == "__main__":
    sys.exit(main())
