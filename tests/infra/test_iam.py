"""Each function's role names only its own resources, with the actions its job needs."""

from __future__ import annotations

from typing import Any

import pytest

from sluice import constants as c
from tests.infra.helpers import actions, function_ids, literal, of_type, resource_list, statements_for_role

pytestmark = pytest.mark.infra

XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
SIGNERS = (c.FN_BROKER, c.FN_CONSUMER)  # redrive pulls (broker); pull, ack, extend, push (consumer)


@pytest.fixture(scope="module")
def grants(resources: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Function name -> its role's statements."""
    out = {}
    for name, lid in function_ids(resources).items():
        (role_id,) = [resources[lid]["Properties"]["Role"]["Fn::GetAtt"][0]]
        out[name] = list(statements_for_role(resources, role_id))
    return out


def granted(statements: list[dict[str, Any]], prefix: str) -> dict[str, list[Any]]:
    """action -> resources, for actions starting with `prefix`."""
    out: dict[str, list[Any]] = {}
    for s in statements:
        assert s["Effect"] == "Allow"
        for a in actions(s):
            if a.startswith(prefix):
                out.setdefault(a, []).extend(resource_list(s))
    return out


def table_ids(resources: dict[str, Any]) -> set[str]:
    return set(of_type(resources, "AWS::DynamoDB::Table"))


def test_every_resource_named_belongs_to_the_function(
    resources: dict[str, Any], grants: dict[str, Any]
) -> None:
    fn_ids = function_ids(resources)
    tables = table_ids(resources)
    prefix = c.SHARD_MAP_PREFIX_TEMPLATE.format(stage="dev")
    for name, statements in grants.items():
        own_logs = resources[fn_ids[name]]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        allowed = {own_logs, c.LOGICAL_SEGMENT_BUCKET, *tables}
        if name == c.FN_COORDINATOR:
            allowed |= {consumer_alias_id(resources), fn_ids[c.FN_SHARD]}
        if name == c.FN_BROKER:  # it wakes the coordinator when its shards throttle
            allowed.add(fn_ids[c.FN_COORDINATOR])
        if name in SIGNERS:
            allowed.add(c.LOGICAL_LEASE_KEY_SECRET)
        for s in statements:
            for res in resource_list(s):
                if res == "*":
                    assert set(actions(s)) <= XRAY, f"{name}: '*' for {actions(s)}"
                    continue
                named = _refs(res)
                assert named <= allowed, f"{name} reaches {named - allowed}"
                if any(a.startswith("ssm:") for a in actions(s)):
                    text = literal(res)
                    assert text.endswith((f":parameter{prefix}", f":parameter{prefix}/*")), text


def _refs(value: Any) -> set[str]:
    from tests.infra.helpers import refs

    return refs(value)


# What each function's code calls, table by table (the IAM call audit records it; stacks/access.py).
CONTROL = {
    c.FN_BROKER: {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query"},
    c.FN_CONSUMER: {"GetItem", "UpdateItem", "Query"},
    c.FN_SHARD: {"GetItem", "PutItem", "DeleteItem", "Query"},
    c.FN_COORDINATOR: {"GetItem", "PutItem", "UpdateItem", "Query"},
}
SHARDS = {
    c.FN_BROKER: {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "BatchGetItem"},
    c.FN_CONSUMER: {"GetItem", "PutItem", "UpdateItem", "Query", "BatchGetItem"},
    c.FN_SHARD: {"GetItem", "PutItem", "UpdateItem", "Query", "BatchWriteItem"},
    c.FN_COORDINATOR: {"UpdateItem", "Query", "BatchGetItem"},
}


def test_each_function_holds_only_the_table_actions_it_calls(
    resources: dict[str, Any], grants: dict[str, Any]
) -> None:
    """No role may Scan, BatchWriteItem or DeleteItem a table it does not (the control table holds token
    hashes); each table's actions are the ones the function's code calls, on that table alone."""
    shard_tables = table_ids(resources) - {c.LOGICAL_CONTROL_TABLE}
    for name, statements in grants.items():
        by_table: dict[str, set[str]] = {}
        for action, arns in granted(statements, "dynamodb:").items():
            for arn in arns:
                by_table.setdefault(arn["Fn::GetAtt"][0], set()).add(action.removeprefix("dynamodb:"))
        assert by_table.pop(c.LOGICAL_CONTROL_TABLE) == CONTROL[name], name
        assert set(by_table) == shard_tables, name
        assert all(got == SHARDS[name] for got in by_table.values()), (name, by_table)


def test_ssm_actions_per_function(grants: dict[str, Any]) -> None:
    ssm = {name: set(granted(st, "ssm:")) for name, st in grants.items()}
    assert {"ssm:GetParameter", "ssm:PutParameter", "ssm:DeleteParameters"} <= ssm[c.FN_BROKER]
    assert "ssm:GetParameter" in ssm[c.FN_CONSUMER]
    assert not ssm[c.FN_CONSUMER] & {"ssm:PutParameter", "ssm:DeleteParameters"}
    # The coordinator lists the path and deletes the mirrors of deleted queues that linger in its region.
    assert {"ssm:GetParameter", "ssm:GetParametersByPath", "ssm:PutParameter", "ssm:DeleteParameters"} <= ssm[
        c.FN_COORDINATOR
    ]
    assert not ssm[c.FN_SHARD]


def test_s3_access_per_function(grants: dict[str, Any]) -> None:
    """Prefixes, not the bucket: nobody but Glue reaches `exports/`, only the shard function deletes
    (`segments/`, and `payload/` orphans) or lists (`payload/` only), and payload-tier objects are
    written with the tag their lifecycle rule expires them by."""
    s3 = {
        name: {a: sorted(literal(r) for r in rs) for a, rs in granted(st, "s3:").items()}
        for name, st in grants.items()
    }
    both = ["<ref>/overflow/*", "<ref>/payload/*"]
    assert s3[c.FN_BROKER] == {
        "s3:PutObject": both,
        "s3:GetObject": both,
        "s3:PutObjectTagging": ["<ref>/payload/*"],
    }
    # Moving a message to a dead letter queue writes a new overflow body, or a payload object.
    assert s3[c.FN_CONSUMER] == {
        "s3:GetObject": ["<ref>/overflow/*", "<ref>/payload/*", "<ref>/segments/*"],
        "s3:PutObject": both,
        "s3:PutObjectTagging": ["<ref>/payload/*"],
    }
    # The flush reads every body it writes into a segment: inline, payload-tier, or over the item limit.
    assert s3[c.FN_SHARD] == {
        "s3:GetObject": ["<ref>/overflow/*", "<ref>/payload/*", "<ref>/segments/*"],
        "s3:PutObject": ["<ref>/segments/*"],
        "s3:DeleteObject": ["<ref>/payload/*", "<ref>/segments/*"],
        "s3:ListBucket": ["<ref>"],
    }
    listing = next(st for st in grants[c.FN_SHARD] if "s3:ListBucket" in str(st["Action"]))
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["payload/*"]}}
    assert not s3[c.FN_COORDINATOR]


def test_invoke_grants_coordinator_own_functions_consumer_push_targets_only(
    resources: dict[str, Any], grants: dict[str, Any]
) -> None:
    fn_ids = function_ids(resources)
    for name, statements in grants.items():
        invoke = granted(statements, "lambda:")
        if name not in (c.FN_COORDINATOR, c.FN_CONSUMER, c.FN_BROKER):
            assert not invoke, f"{name} may invoke {invoke}"
    # The broker wakes the coordinator when its shards throttle (sluice/engine/wake.py): nothing else.
    assert granted(grants[c.FN_BROKER], "lambda:") == {
        "lambda:InvokeFunction": [{"Fn::GetAtt": [fn_ids[c.FN_COORDINATOR], "Arn"]}]
    }
    # Push consumers of type lambda: only the functions context push_lambda_targets names (default
    # sluice-<stage>-push-*), unqualified or any version/alias of them.
    push = granted(grants[c.FN_CONSUMER], "lambda:")
    assert set(push) == {"lambda:InvokeFunction"}
    assert sorted(literal(r) for r in push["lambda:InvokeFunction"]) == [
        "arn:<ref>:lambda:<ref>:<ref>:function:sluice-dev-push-*",
        "arn:<ref>:lambda:<ref>:<ref>:function:sluice-dev-push-*:*",
    ]
    invoke = granted(grants[c.FN_COORDINATOR], "lambda:")
    assert set(invoke) == {"lambda:InvokeFunction"}
    # The consumer only through its SnapStart alias (an alias's Ref is its ARN); shard unqualified.
    granted_arns = invoke["lambda:InvokeFunction"]
    assert len(granted_arns) == 2
    assert {"Ref": consumer_alias_id(resources)} in granted_arns
    assert {"Fn::GetAtt": [fn_ids[c.FN_SHARD], "Arn"]} in granted_arns


def consumer_alias_id(resources: dict[str, Any]) -> str:
    fn_ids = function_ids(resources)
    [alias] = [
        lid
        for lid, r in of_type(resources, "AWS::Lambda::Alias").items()
        if r["Properties"]["FunctionName"] == {"Ref": fn_ids[c.FN_CONSUMER]}
    ]
    assert resources[alias]["Properties"]["Name"] == c.API_ALIAS
    return alias


def test_no_function_touches_glue_iam_or_other_secrets(grants: dict[str, Any]) -> None:
    for name, statements in grants.items():
        for s in statements:
            for a in actions(s):
                assert not a.startswith(("glue:", "iam:", "kms:")), f"{name}: {a}"
                assert "*" not in a, f"{name}: wildcard action {a}"
                if a.startswith("secretsmanager:"):
                    assert name in SIGNERS, f"{name}: {a}"
                    assert a == "secretsmanager:GetSecretValue", a  # nothing calls DescribeSecret
                    assert resource_list(s) == [{"Ref": c.LOGICAL_LEASE_KEY_SECRET}], s


def test_the_functions_that_sign_or_verify_leases_read_the_lease_key(grants: dict[str, Any]) -> None:
    for name in SIGNERS:
        secrets = granted(grants[name], "secretsmanager:")
        assert secrets["secretsmanager:GetSecretValue"] == [{"Ref": c.LOGICAL_LEASE_KEY_SECRET}], name


def test_glue_role_reads_bucket_and_token_only(resources: dict[str, Any]) -> None:
    (job,) = [j for j in of_type(resources, "AWS::Glue::Job").values()][:1]
    role_id = job["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = list(statements_for_role(resources, role_id))
    named = set().union(*(_refs(r) for s in statements for r in resource_list(s)))
    secrets = set(of_type(resources, "AWS::SecretsManager::Secret"))
    assert named <= {c.LOGICAL_SEGMENT_BUCKET, *secrets}
    assert not any(a.startswith(("dynamodb:", "lambda:", "ssm:")) for s in statements for a in actions(s))
