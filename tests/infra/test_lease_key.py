"""The lease-signing key: a generated Secrets Manager secret, named on every function, readable only by
the functions that sign or verify lease ids (CDK assertions on the synthesized template)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice import constants as c
from tests.infra.helpers import function_ids

pytestmark = pytest.mark.infra


def test_the_secret_is_generated_by_secrets_manager_in_the_keyring_format(template: Any, stack: Any) -> None:
    from aws_cdk.assertions import Match

    template.has_resource(
        "AWS::SecretsManager::Secret",
        {
            "Properties": {
                "Name": Match.absent(),  # generated: a redeploy after a destroy must not collide
                "GenerateSecretString": {
                    "SecretStringTemplate": json.dumps({"current_id": 1}),
                    "GenerateStringKey": "current",
                    "PasswordLength": 64,
                    "ExcludePunctuation": True,
                },
                "SecretString": Match.absent(),  # no key material in the template
            }
        },
    )
    secrets = template.find_resources("AWS::SecretsManager::Secret")
    assert c.LOGICAL_LEASE_KEY_SECRET in secrets


def test_every_function_is_told_the_secret(resources: dict[str, Any]) -> None:
    for lid in function_ids(resources).values():
        env = resources[lid]["Properties"]["Environment"]["Variables"]
        assert env[c.ENV_LEASE_KEY_SECRET] == {"Ref": c.LOGICAL_LEASE_KEY_SECRET}
        assert float(env[c.ENV_LEASE_KEY_CACHE_TTL]) > 0


def test_only_broker_and_consumer_may_read_it(template: Any, resources: dict[str, Any]) -> None:
    readers = set()
    for policy in template.find_resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement.get("Resource") == {"Ref": c.LOGICAL_LEASE_KEY_SECRET}:
                assert statement["Action"] == "secretsmanager:GetSecretValue"  # nothing calls DescribeSecret
                readers |= {r["Ref"] for r in policy["Properties"]["Roles"]}
    roles = {
        name: resources[lid]["Properties"]["Role"]["Fn::GetAtt"][0]
        for name, lid in function_ids(resources).items()
    }
    assert readers == {roles[c.FN_BROKER], roles[c.FN_CONSUMER]}
    template.has_output("LeaseKeySecretArn", {"Value": {"Ref": c.LOGICAL_LEASE_KEY_SECRET}})
