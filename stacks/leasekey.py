"""The lease-signing keys: a Secrets Manager secret the stack generates, read by the functions that
sign or verify lease ids (broker: redrive; consumer: pull, ack, extend, push delivery).

Value (JSON, see `sluice.leases.LeaseKeyring`): `{"current_id": 1, "current": "<64 random chars>"}`
at creation. Rotation: `sluice lease-key rotate` writes a new version whose current key is new and
whose previous key (the old current) keeps verifying for one visibility period, so no live lease is
invalidated; functions pick the new version up within their cache TTL, and a lease naming a key a
container does not know yet makes that container re-read the secret at once.
"""

from __future__ import annotations

from aws_cdk import CfnResource, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from cdk_nag import NagSuppressions
from constructs import Construct

from sluice import constants as c


class LeaseKey(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, retain: bool) -> None:
        super().__init__(scope, construct_id)
        self.secret = secretsmanager.Secret(
            self,
            c.LOGICAL_LEASE_KEY_SECRET,
            # No fixed name: a deleted secret keeps its name for its recovery window (7-30 days), so a
            # fixed one would make redeploying a destroyed stage fail. Functions get the ARN.
            description="HMAC keys that sign Sluice lease ids (current + previous; see stacks/leasekey.py)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template='{"current_id": 1}',
                generate_string_key="current",
                password_length=64,
                exclude_punctuation=True,
            ),
            removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
        )
        cfn = self.secret.node.default_child
        assert isinstance(cfn, CfnResource)
        cfn.override_logical_id(c.LOGICAL_LEASE_KEY_SECRET)  # the local runtime finds it by this id
        NagSuppressions.add_resource_suppressions(
            self.secret,
            [
                {
                    "id": "AwsSolutions-SMG4",
                    "reason": "Rotated by the operator with `sluice lease-key rotate` (no rotation "
                    "Lambda): it keeps the previous key valid for one visibility period so live "
                    "leases survive; see docs/security.md.",
                }
            ],
        )

    def grant_read(self, functions: list[lambda_.Function]) -> None:
        for fn in functions:
            self.secret.grant_read(fn)
