"""cdk-nag AwsSolutions: no unsuppressed error or warning, and every suppression says why."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match

from tests.infra.helpers import of_type

pytestmark = pytest.mark.infra


# `has_no_error` raises listing every finding. (`find_error` cannot be used from Python: turning a
# finding into a SynthesisMessage fails in jsii with "Unknown interface ...MetadataEntry".)
NAG = Match.string_like_regexp("AwsSolutions-.*")


def test_no_unsuppressed_aws_solutions_errors(stack: Any, template: Any) -> None:
    Annotations.from_stack(stack).has_no_error("*", NAG)


def test_no_unsuppressed_aws_solutions_warnings(stack: Any, template: Any) -> None:
    Annotations.from_stack(stack).has_no_warning("*", NAG)


def test_suppressions_have_specific_reasons(resources: dict[str, Any]) -> None:
    reasons = [
        s
        for r in resources.values()
        for s in r.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    ]
    assert reasons
    for s in reasons:
        assert s["id"].startswith("AwsSolutions-")
        assert len(s["reason"]) >= 60, s
        if s["id"] == "AwsSolutions-IAM5":  # wildcard grants: each suppression names its findings
            assert s.get("applies_to"), s


def test_a_suppression_covers_only_the_findings_it_names() -> None:
    """`stacks.nag.iam5` keeps `applies_to` (a plain dict loses it and suppresses every finding): a
    wildcard the suppression does not name is still an error."""
    import aws_cdk as cdk
    from aws_cdk import aws_iam as iam
    from cdk_nag import AwsSolutionsChecks, NagSuppressions

    from stacks.nag import iam5

    app = cdk.App()
    bare = cdk.Stack(app, "Wildcards")
    role = iam.Role(bare, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    role.add_to_policy(iam.PolicyStatement(actions=["xray:PutTraceSegments"], resources=["*"]))
    role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=["arn:aws:s3:::b/*"]))
    NagSuppressions.add_resource_suppressions(
        role, [iam5("X-Ray takes no resource-level permissions here", "Resource::*")], apply_to_children=True
    )
    cdk.Aspects.of(app).add(AwsSolutionsChecks())
    with pytest.raises(Exception, match=r"AwsSolutions-IAM5\[Resource::arn:aws:s3:::b/\*\]") as raised:
        Annotations.from_stack(bare).has_no_error("*", NAG)
    assert "Resource::*]" not in str(raised.value)


def test_each_wildcard_suppression_names_exactly_the_grants_it_excuses(resources: dict[str, Any]) -> None:
    """IAM5 suppressions name their findings by exact text, never by pattern (a pattern once excused any
    Lambda ARN for the push targets, any object key of the bucket): every name is a wildcard resource its
    policy grants, and every wildcard resource the policy grants is named."""
    from stacks.nag import _as_nag_writes
    from tests.infra.helpers import resource_list

    checked = 0
    for lid, policy in of_type(resources, "AWS::IAM::Policy").items():
        rules = policy.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
        named = [a for r in rules if r["id"] == "AwsSolutions-IAM5" for a in r.get("applies_to", [])]
        assert all(isinstance(a, str) for a in named), (lid, [a for a in named if not isinstance(a, str)])
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        wildcards = {
            "Resource::" + _as_nag_writes(r) for st in statements for r in resource_list(st) if "*" in str(r)
        }
        assert set(named) == wildcards, (lid, set(named) ^ wildcards)
        checked += bool(named)
    assert checked >= 5  # the four functions' roles and Glue's


def test_no_managed_policies_on_any_role(resources: dict[str, Any]) -> None:
    for lid, role in of_type(resources, "AWS::IAM::Role").items():
        assert not role["Properties"].get("ManagedPolicyArns"), lid


def test_the_nag_check_would_catch_a_finding() -> None:
    """Guard against a vacuous pass: an unsuppressed finding does show up as an error annotation."""
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3
    from cdk_nag import AwsSolutionsChecks

    app = cdk.App()
    bare = cdk.Stack(app, "Bare")
    s3.Bucket(bare, "Plain")
    cdk.Aspects.of(app).add(AwsSolutionsChecks())
    annotations = Annotations.from_stack(bare)
    annotations.has_error("*", Match.string_like_regexp("AwsSolutions-S10.*"))
    with pytest.raises(Exception, match="AwsSolutions-S10"):
        annotations.has_no_error("*", NAG)
