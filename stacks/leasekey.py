"""The lease-signing keys: a Secrets Manager secret the stack generates, read by the functions that
sign or verify lease ids (broker: redrive; consumer: pull, ack, extend, push delivery).

Value (JSON, see `sluice.leases.LeaseKeyring`): `{"current_id": 1, "current": "<64 random chars>"}`
at creation. Rotation: `sluice lease-key rotate` writes a new version whose current key is new and
whose previous key (the old current) keeps verifying for one visibility period, so no live lease is
invalidated; functions pick the new version up within their cache TTL, and a lease naming a key a
container does not know yet makes that container re-read the secret at once.

Multi-region: every region must verify the leases every other region signs (a consumer in one region
acks a message leased in another), so one secret, named `sluice/<stage>/lease-key`, lives in the home
region's stack and Secrets Manager replicates it (and each rotation) to every other region; the other
regions' stacks refer to their replica by that name.

The secret is not data: it goes with the stack on `cdk destroy` whatever `retain_data` says
(CloudFormation deletes a secret without a recovery window, replicas included), so the fixed name is free
for the next deploy. Leases signed with the old key are then refused, and their messages come back once
their visibility timeout passes: at-least-once, nothing acknowledged is lost.
"""

from __future__ import annotations

from aws_cdk import CfnResource, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from cdk_nag import NagSuppressions
from constructs import Construct

from sluice import constants as c
from stacks.regions import Deployment


class LeaseKey(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, deployment: Deployment | None = None) -> None:
        super().__init__(scope, construct_id)
        self.deployment = deployment
        self.secret: secretsmanager.ISecret
        if deployment is not None and not deployment.is_home:
            self.secret = secretsmanager.Secret.from_secret_name_v2(
                self, c.LOGICAL_LEASE_KEY_SECRET, deployment.lease_key_secret_name
            )
            return
        self.secret = secretsmanager.Secret(
            self,
            c.LOGICAL_LEASE_KEY_SECRET,
            # Single region: a generated name, functions get the ARN. Multi-region: named and
            # replicated (see above).
            secret_name=deployment.lease_key_secret_name if deployment else None,
            replica_regions=(
                [secretsmanager.ReplicaRegion(region=r) for r in deployment.others] if deployment else None
            ),
            description="HMAC keys that sign Sluice lease ids (current + previous; see stacks/leasekey.py)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template='{"current_id": 1}',
                generate_string_key="current",
                password_length=64,
                exclude_punctuation=True,
            ),
            removal_policy=RemovalPolicy.DESTROY,  # not data: see above
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

    @property
    def secret_id(self) -> str:
        """What functions are told: the ARN, or with a multi-region deployment the name (the same in
        every region; each region's functions read their own replica)."""
        if self.deployment is None:
            return self.secret.secret_arn
        return self.deployment.lease_key_secret_name

    def grant_read(self, functions: list[lambda_.Function]) -> None:
        """GetSecretValue only (CDK's `grant_read` adds DescribeSecret, which nothing calls). A secret
        referred to by name (other regions' replica) matches any of the six characters AWS appends."""
        arn = self.secret.secret_full_arn or f"{self.secret.secret_arn}-??????"
        for fn in functions:
            fn.add_to_role_policy(
                iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[arn])
            )
