"""A stage destroyed with `retain_data` deploys again and gets its data back (docs/deploy.md "Deploy again
after a destroy"): synthesized as the CDK CLI synthesizes for a deploy (CDK_DEFAULT_ACCOUNT/REGION set from
the caller's credentials), every resource a destroy leaves behind is either data the next deploy adopts
(`cdk deploy --import-existing-resources`: CloudFormation imports a retained resource of an importable type
whose template gives its literal name, the name the functions use), or has a generated name, so it never
collides; and every named resource that is not data goes with the stack, so its name is free again.
Checked for a single-region stack and for both regions of a multi-region deployment (≈ 35 s of synth).
"""

from __future__ import annotations

from typing import Any

import pytest

from sluice import constants as c

pytestmark = pytest.mark.infra

ACCOUNT = "111122223333"
HOME, OTHER = "us-east-1", "eu-west-1"
STAGE = c.DEFAULT_STAGE
# Types CloudFormation can import, with the property that names them (its primary identifier).
IMPORTABLE = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::DynamoDB::GlobalTable": "TableName",
    "AWS::S3::Bucket": "BucketName",
}
# The property that would give a physical name, for the named types the stacks hold.
NAME_PROPERTY = {
    **IMPORTABLE,
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::SecretsManager::Secret": "Name",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::IAM::Role": "RoleName",
    "AWS::Glue::Job": "Name",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::Events::Rule": "Name",
}


def _synth(monkeypatch: pytest.MonkeyPatch, tmp: Any, context: dict[str, Any]) -> dict[str | None, Any]:
    from aws_cdk.assertions import Template

    from app import build_stacks

    monkeypatch.setenv("CDK_DEFAULT_ACCOUNT", ACCOUNT)
    monkeypatch.setenv("CDK_DEFAULT_REGION", HOME)
    _, stacks = build_stacks(context, outdir=str(tmp))
    return {region: Template.from_stack(stack).to_json()["Resources"] for region, stack in stacks.items()}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> dict[str | None, Any]:
    """Resources per region as the CLI synthesizes them for a deploy: the single-region stack (None) and
    both regions of a multi-region deployment."""
    with pytest.MonkeyPatch.context() as mp:
        single = _synth(mp, tmp_path_factory.mktemp("cdk.out.single"), {})
        multi = _synth(mp, tmp_path_factory.mktemp("cdk.out.multi"), {"regions": f"{HOME},{OTHER}"})
    return {**single, **multi}


def data_names(region: str, multi: bool) -> dict[str, str]:
    """Logical id -> the name the data resources have in AWS (what the functions are told)."""
    names = {
        lid: c.physical_name(STAGE, lid)
        for lid in (c.LOGICAL_CONTROL_TABLE, *(f"{c.LOGICAL_SHARD_TABLE_PREFIX}{i}" for i in range(4)))
    }
    if multi and region != HOME:  # the other regions' control table is the home stack's global table
        del names[c.LOGICAL_CONTROL_TABLE]
    names[c.LOGICAL_SEGMENT_BUCKET] = c.physical_name(
        STAGE, c.LOGICAL_SEGMENT_BUCKET, account=ACCOUNT, region=region
    )
    return names


@pytest.mark.parametrize("region", [None, HOME, OTHER])
def test_the_data_a_destroy_keeps_is_adopted_by_its_literal_name(deployed: dict[str | None, Any], region):
    resources = deployed[region]
    for lid, name in data_names(region or HOME, multi=region is not None).items():
        res = resources[lid]
        assert res["Type"] in IMPORTABLE, lid
        assert res.get("DeletionPolicy") == "Retain" and res.get("UpdateReplacePolicy") == "Retain", lid
        assert res["Properties"][IMPORTABLE[res["Type"]]] == name, lid


@pytest.mark.parametrize("region", [None, HOME, OTHER])
def test_nothing_a_destroy_leaves_behind_blocks_the_next_deploy(deployed: dict[str | None, Any], region):
    """Retained: data (importable, literally named) or a generated name. Named and not data: deleted."""
    resources = deployed[region]
    data = data_names(region or HOME, multi=region is not None)
    for lid, res in resources.items():
        name = res.get("Properties", {}).get(NAME_PROPERTY.get(res["Type"], ""))
        if res.get("DeletionPolicy") == "Retain":
            assert lid in data or name is None, f"{lid} ({res['Type']}) is retained under a fixed name"
        elif name is not None:
            assert res.get("DeletionPolicy", "Delete") == "Delete", lid
    secret = resources.get(c.LOGICAL_LEASE_KEY_SECRET)
    if secret is not None:  # the lease key is not data: deleted (without recovery window) with the stack
        assert secret.get("DeletionPolicy", "Delete") == "Delete"


def test_without_credentials_the_bucket_name_is_joined_at_deploy_time(resources: dict[str, Any]) -> None:
    """A plain `python app.py` stays environment-agnostic: the name is joined from the account and region."""
    name = resources[c.LOGICAL_SEGMENT_BUCKET]["Properties"]["BucketName"]
    sep, parts = name["Fn::Join"]
    assert sep == "" and parts[0] == f"sluice-{STAGE}-segments-"
    assert {"Ref": "AWS::AccountId"} in parts and {"Ref": "AWS::Region"} in parts


def test_a_stage_too_long_for_the_bucket_name_is_refused_when_the_region_is_known(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    from app import build_stacks

    monkeypatch.setenv("CDK_DEFAULT_ACCOUNT", ACCOUNT)
    monkeypatch.setenv("CDK_DEFAULT_REGION", "ap-southeast-2")
    with pytest.raises(ValueError, match="shorter stage"):
        build_stacks({"stage": "a-twenty-char-stage0"}, outdir=str(tmp_path))
