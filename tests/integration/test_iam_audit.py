"""The IAM call audit catches a missing grant: the calls of a real scenario pass against the template
and are denied once one grant is removed from a copy of it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from sluice import constants as c
from sluice.local import callaudit, iamcheck


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return iamcheck.template_for_stage("test")


@pytest.fixture
def scenario_calls(api, queue_name, tmp_path: Path, monkeypatch) -> list[iamcheck.Call]:
    """Send a message over the overflow threshold, retry it into its DLQ: broker and consumer calls."""
    path = tmp_path / "calls.jsonl"
    monkeypatch.setenv(c.ENV_IAM_AUDIT_FILE, str(path))
    settings = {"max_message_bytes": 400_000, "max_retries": 1, "dead_letter_queue": f"{queue_name}-dlq"}
    assert api("POST", "/v1/queues", {"queue_name": queue_name, "settings": settings})[0] == 201
    assert api("POST", f"/v1/queues/{queue_name}/messages", {"messages": [{"body": "x" * 300_000}]})[0] == 200
    (msg,) = api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 1})[1]["result"]["messages"]
    ack = {"retries": [{"lease_id": msg["lease_id"]}]}
    assert api("POST", f"/v1/queues/{queue_name}/messages/ack", ack)[0] == 200
    api("POST", f"/v1/queues/{queue_name}/messages/pull", {"batch_size": 1})
    return iamcheck.load_calls(path)


def _without(template: dict[str, Any], function: str, action: str) -> dict[str, Any]:
    """A copy of the template whose `function` role no longer has `action` (one grant removed)."""
    edited = copy.deepcopy(template)
    roles = iamcheck.TemplateRoles(edited, "test")
    role = roles.role_of(function)
    removed = 0
    for res in edited["Resources"].values():
        if res["Type"] == "AWS::IAM::Policy" and {"Ref": role} in res["Properties"]["Roles"]:
            for statement in res["Properties"]["PolicyDocument"]["Statement"]:
                actions = (
                    statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                )
                kept = [a for a in actions if a != action]
                removed += len(actions) - len(kept)
                statement["Action"] = kept or ["none:Nothing"]
    assert removed, f"{function} had no {action} grant"
    return edited


def test_scenario_is_allowed_by_the_template(scenario_calls, template) -> None:
    assert {call.function for call in scenario_calls} == {c.FN_BROKER, c.FN_CONSUMER}
    assert iamcheck.check(scenario_calls, lambda stage: template) == []


@pytest.mark.parametrize(
    ("function", "action"),
    # Not an SSM read: the scenario's handlers share one process, whose cached documents (made by the
    # broker's creates) the consumer reads without SSM; separate containers read it once each.
    [(c.FN_CONSUMER, "s3:PutObject"), (c.FN_BROKER, "dynamodb:PutItem"), (c.FN_CONSUMER, "dynamodb:Query")],
)
def test_a_removed_grant_is_reported(scenario_calls, template, function: str, action: str) -> None:
    denials = iamcheck.check(scenario_calls, lambda stage: _without(template, function, action))
    assert denials
    assert {(d.call.function, d.call.action) for d in denials} == {(function, action)}
    print(iamcheck.report(scenario_calls, denials, limit=5))


def test_matching_follows_iam_wildcards() -> None:
    allow = [{"Effect": "Allow", "Action": "s3:Get*", "Resource": "arn:aws:s3:::b/overflow/*"}]
    assert iamcheck.allowed(allow, "s3:GetObject", "arn:aws:s3:::b/overflow/q/1")
    assert iamcheck.allowed(allow, "S3:getobject", "arn:aws:s3:::b/overflow/q/1")  # actions: any case
    assert not iamcheck.allowed(allow, "s3:GetObject", "arn:aws:s3:::b/segments/q/1")
    assert not iamcheck.allowed(allow, "s3:PutObject", "arn:aws:s3:::b/overflow/q/1")
    deny = [*allow, {"Effect": "Deny", "Action": "s3:*", "Resource": "*"}]
    assert not iamcheck.allowed(deny, "s3:GetObject", "arn:aws:s3:::b/overflow/q/1")
    conditional = [{**allow[0], "Condition": {"Bool": {"aws:SecureTransport": "true"}}}]
    assert not iamcheck.allowed(conditional, "s3:GetObject", "arn:aws:s3:::b/overflow/q/1")


def test_intrinsics_resolve_to_local_names() -> None:
    template = {
        "Resources": {
            c.LOGICAL_SEGMENT_BUCKET: {"Type": "AWS::S3::Bucket", "Properties": {}},
            c.LOGICAL_CONTROL_TABLE: {"Type": "AWS::DynamoDB::Table", "Properties": {}},
        }
    }
    roles = iamcheck.TemplateRoles(template, "qa", "eu-west-1")
    joined = {"Fn::Join": ["", [{"Fn::GetAtt": [c.LOGICAL_SEGMENT_BUCKET, "Arn"]}, "/overflow/*"]]}
    assert roles.resolve(joined) == "arn:aws:s3:::sluice-qa-segments/overflow/*"
    sub = {"Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/x"}
    assert roles.resolve(sub) == "arn:aws:ssm:eu-west-1:123456789012:parameter/x"
    table = roles.resolve({"Fn::GetAtt": [c.LOGICAL_CONTROL_TABLE, "Arn"]})
    assert table == "arn:aws:dynamodb:eu-west-1:123456789012:table/sluice-qa-control"


def test_a_secret_read_is_checked_against_the_secret_the_role_names() -> None:
    """A secret's Ref is its ARN, which ends in six random characters: a read of the stack's secret by
    its full ARN is allowed, a read of another secret is not."""
    from sluice.local import callaudit

    template = {"Resources": {c.LOGICAL_LEASE_KEY_SECRET: {"Type": "AWS::SecretsManager::Secret"}}}
    roles = iamcheck.TemplateRoles(template, "qa")
    grant = {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue"}
    grant["Resource"] = roles.resolve({"Ref": c.LOGICAL_LEASE_KEY_SECRET})
    name = c.LEASE_KEY_SECRET_NAME_TEMPLATE.format(stage="qa")
    prefix = "arn:aws:secretsmanager:us-east-1:123456789012:secret:"
    ((action, own),) = callaudit.iam_requests(
        "secretsmanager", "GetSecretValue", {"SecretId": f"{prefix}{name}-AbC123"}, "us-east-1"
    )
    assert iamcheck.allowed([grant], action, own)
    ((_, other),) = callaudit.iam_requests(
        "secretsmanager", "GetSecretValue", {"SecretId": "other"}, "us-east-1"
    )
    assert other == f"{prefix}other"
    assert not iamcheck.allowed([grant], action, other)


def test_the_coordinator_may_start_the_consumer_alias_and_shard_only(template) -> None:
    """Push workers start on the consumer's SnapStart alias (the grant is on the alias ARN, which an
    unqualified grant would not cover); the consumer's $LATEST and other aliases are denied."""

    def invoke(name: str) -> iamcheck.Call:
        [(action, arn)] = callaudit.iam_requests("lambda", "Invoke", {"FunctionName": name}, "us-east-1")
        return iamcheck.Call(c.FN_COORDINATOR, "test", action, arn)

    allowed = [invoke(f"{c.FN_CONSUMER}:{c.API_ALIAS}"), invoke(c.FN_SHARD), invoke("sluice-local-shard")]
    assert iamcheck.check(allowed, lambda stage: template) == []
    denied = [invoke(c.FN_CONSUMER), invoke(f"{c.FN_CONSUMER}:old"), invoke(f"{c.FN_BROKER}:{c.API_ALIAS}")]
    assert [d.call for d in iamcheck.check(denied, lambda stage: template)] == denied


def test_the_shard_function_lists_its_bucket_under_payload_only(template) -> None:
    """The listing grant is conditioned on `s3:prefix` (the flush looks for the payload-tier objects of
    crashed sends): the audit records a listing's prefix and the check evaluates the condition."""

    def listing(prefix: str) -> iamcheck.Call:
        params = {"Bucket": "sluice-test-segments-123456789012-us-east-1", "Prefix": prefix}
        [(action, arn)] = callaudit.iam_requests("s3", "ListObjectsV2", params, "us-east-1")
        keys = callaudit.condition_keys("s3", "ListObjectsV2", params)
        return iamcheck.Call(c.FN_SHARD, "test", action, arn, s3_prefix=keys["s3:prefix"])

    assert iamcheck.check([listing(f"{c.PAYLOAD_PREFIX}q#0001#3/")], lambda stage: template) == []
    unknown = listing("")
    unknown = iamcheck.Call(c.FN_SHARD, "test", unknown.action, unknown.resource)  # no prefix recorded
    denied = [listing("segments/q/"), listing(""), unknown]
    assert [d.call for d in iamcheck.check(denied, lambda stage: template)] == denied


def _with_extra_grant(template: dict[str, Any], function: str, action: str) -> dict[str, Any]:
    """A copy of the template whose `function` role also holds `action` on the control table."""
    edited = copy.deepcopy(template)
    role = iamcheck.TemplateRoles(edited, "test").role_of(function)
    policy = next(
        r
        for r in edited["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
    )
    table = {"Fn::GetAtt": [c.LOGICAL_CONTROL_TABLE, "Arn"]}
    policy["Properties"]["PolicyDocument"]["Statement"].append(
        {"Effect": "Allow", "Action": action, "Resource": table}
    )
    return edited


def test_a_granted_action_no_call_uses_is_reported(scenario_calls, template) -> None:
    """The check `make test` runs over the whole suite's calls, here over one scenario's: the broker
    holding Scan on the control table (the table of token hashes), which no call uses, is reported."""
    scan = iamcheck.Grant(
        c.FN_BROKER, "dynamodb:Scan", "arn:aws:dynamodb:<region>:<account>:table/sluice-<stage>-control"
    )
    unexplained, _ = iamcheck.unused(
        scenario_calls, lambda *_: _with_extra_grant(template, c.FN_BROKER, "dynamodb:Scan")
    )
    assert scan in unexplained
    unexplained, _ = iamcheck.unused(scenario_calls, lambda *_: template)
    assert scan not in unexplained
    used = iamcheck.Grant(c.FN_BROKER, "dynamodb:PutItem", scan.resource)  # sends write the control table
    assert used not in unexplained


def test_the_allow_list_gives_reasons_and_a_stale_entry_is_reported(scenario_calls, template) -> None:
    for entry in iamcheck.UNEXERCISED:
        assert len(entry.reason) >= 60, entry
    used = iamcheck.Unexercised(c.FN_BROKER, "dynamodb:PutItem", "*", "sends write the control table " * 3)
    nothing = iamcheck.Unexercised(c.FN_BROKER, "dynamodb:Scan", "*", "no role holds Scan any more " * 3)
    _, stale = iamcheck.unused(scenario_calls, lambda *_: template, [*iamcheck.UNEXERCISED, used, nothing])
    assert used in stale and nothing in stale


def test_the_stack_grants_no_scan_and_no_describe(template) -> None:
    """What the roles held before they were narrowed to the calls: every table's read-write set (Scan,
    BatchWriteItem, DescribeTable, stream reads) for every function, DescribeSecret, ListBucket (but the
    shard function's, under `payload/` alone: the flush lists a shard's tier objects to delete orphans)."""
    roles = iamcheck.TemplateRoles(template, "test")
    statements = [(fn, st) for fn in c.FUNCTION_HANDLERS for st in roles.statements(roles.role_of(fn) or "")]
    listing = {"StringLike": {"s3:prefix": [f"{c.PAYLOAD_PREFIX}*"]}}
    held = {
        a
        for fn, st in statements
        if not (fn == c.FN_SHARD and st["Action"] == "s3:ListBucket" and st.get("Condition") == listing)
        for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
    }
    gone = {"dynamodb:Scan", "dynamodb:DescribeTable", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
    gone |= {
        "dynamodb:ConditionCheckItem",
        "secretsmanager:DescribeSecret",
        "s3:ListBucket",
        "s3:AbortMultipartUpload",
    }
    assert not held & gone, held & gone
