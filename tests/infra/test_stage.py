"""Per-stage deployability: stack name, log groups a redeploy can recreate, push targets, layer fallback.

A second stack (stage `qa`, `retain_data=false`, explicit push targets and layer version) is built once
for this module, next to the default one of conftest.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.helpers import of_type, synth_resources

pytestmark = pytest.mark.infra

QA_CONTEXT = {
    "stage": "qa",
    "retain_data": "false",
    "push_lambda_targets": "arn:aws:lambda:eu-west-1:111122223333:function:orders-*,billing",
    "powertools_layer_version": "7",
}


@pytest.fixture(scope="module")
def qa(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any]]:
    return synth_resources(QA_CONTEXT, str(tmp_path_factory.mktemp("cdk.out.qa")))


def test_stack_name_includes_the_stage_and_the_template_file_does_not(stack: Any, qa: Any) -> None:
    from sluice.local.template import STACK_NAME

    assert stack.stack_name == "sluice-dev"
    assert qa[0].stack_name == "sluice-qa"
    # The local runtime reads cdk.out/<construct id>.template.json: the same file for every stage.
    assert stack.artifact_id == qa[0].artifact_id == STACK_NAME


def _log_groups(resources: dict[str, Any]) -> dict[str, Any]:
    return of_type(resources, "AWS::Logs::LogGroup")


def test_log_groups_have_generated_names(resources: dict[str, Any], qa: Any) -> None:
    for template in (resources, qa[1]):
        groups = _log_groups(template)
        assert len(groups) == 5  # four functions + API access logs
        for lid, group in groups.items():
            assert "LogGroupName" not in group.get("Properties", {}), lid


def test_log_groups_follow_retain_data(resources: dict[str, Any], qa: Any) -> None:
    assert {g["DeletionPolicy"] for g in _log_groups(resources).values()} == {"Retain"}
    assert {g["DeletionPolicy"] for g in _log_groups(qa[1]).values()} == {"Delete"}


def test_push_lambda_targets_from_context(qa: Any) -> None:
    from sluice import constants as c
    from tests.infra.helpers import function_ids, literal, statements_for_role

    resources = qa[1]
    consumer = resources[function_ids(resources)[c.FN_CONSUMER]]
    role = consumer["Properties"]["Role"]["Fn::GetAtt"][0]
    targets = sorted(
        literal(r)
        for s in statements_for_role(resources, role)
        if "lambda:InvokeFunction" in s["Action"]
        for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    )
    assert targets == [
        "arn:<ref>:lambda:<ref>:<ref>:function:billing",
        "arn:<ref>:lambda:<ref>:<ref>:function:billing:*",
        "arn:aws:lambda:eu-west-1:111122223333:function:orders-*",
        "arn:aws:lambda:eu-west-1:111122223333:function:orders-*:*",
    ]


def test_powertools_layer_version_fallback_needs_no_ssm_parameter(qa: Any) -> None:
    from tests.infra.helpers import literal

    resources = qa[1]
    layers = {
        literal(layer)
        for fn in of_type(resources, "AWS::Lambda::Function").values()
        for layer in fn["Properties"].get("Layers", [])
    }
    assert layers == {
        "arn:<ref>:lambda:<ref>:017000801446:layer:AWSLambdaPowertoolsPythonV3-python312-arm64:7"
    }


def test_config_rejects_bad_push_targets() -> None:
    from stacks.config import SluiceConfig

    with pytest.raises(ValueError, match="push_lambda_targets"):
        SluiceConfig(push_lambda_targets="orders fn").validate()
    assert SluiceConfig(push_lambda_targets="").push_lambda_target_list == []


def test_glue_token_setup_output_names_this_stacks_secret_and_api(cfn: dict[str, Any]) -> None:
    from tests.infra.helpers import literal, refs

    output = cfn["Outputs"]["GlueTokenSetup"]["Value"]
    text = literal(output)
    assert text.startswith("aws secretsmanager put-secret-value --secret-id <ref>")
    assert '/v1/tokens -H "Authorization: Bearer $TOKEN"' in text and "jq -er .result.token" in text
    secrets = set(of_type(cfn["Resources"], "AWS::SecretsManager::Secret"))
    assert refs(output) & secrets
