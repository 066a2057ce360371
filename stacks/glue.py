"""Glue job definitions for the Spark consumers, in Glue 5.0 (Spark 3.5) and Glue 6.0 (Spark 4.1) variants.

- Scripts (`glue_jobs/*.py`) are S3 assets; the code they import (`glue_jobs` and the modules of `sluice`
  it uses) is one zip in `--extra-py-files`, built at synth by stacks/glue_artifact.py (why a zip, what
  goes in, how it is cached). The jobs need nothing Glue lacks, so no `--additional-python-modules`:
  no PyPI access at job start.
- The role reads the segment bucket, writes `exports/` and `glue/tmp/`, reads the API token secret,
  and writes its own logs; the pull consumer reaches the API over HTTPS with that bearer token.
"""

from __future__ import annotations

import re

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_secretsmanager as secretsmanager
from cdk_nag import NagSuppressions
from constructs import Construct

from stacks.glue_artifact import REPO_ROOT, build_glue_artifact
from stacks.nag import finding, iam5
from stacks.storage import EXPORTS_PREFIX, GLUE_TMP_PREFIX, SEGMENTS_PREFIX, Storage

GLUE_VERSIONS = {"glue5": "5.0", "glue6": "6.0"}
JOB_SCRIPTS = {"pull-consumer": "glue_jobs/pull_consumer.py", "segment-reader": "glue_jobs/segment_reader.py"}


class GlueJobs(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, stage: str, storage: Storage, api_url: str
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        bucket = storage.segment_bucket

        self.artifact_path = build_glue_artifact()
        self.code = s3_assets.Asset(self, "GlueCode", path=str(self.artifact_path))
        self.scripts = {
            name: s3_assets.Asset(self, f"{_title(name)}Script", path=str(REPO_ROOT / rel))
            for name, rel in JOB_SCRIPTS.items()
        }
        self.token_secret = secretsmanager.Secret(
            self,
            "ApiTokenSecret",
            # Generated name, like the lease key's: a fixed one blocks redeploying a destroyed stage.
            description="Bearer token the Glue pull consumer sends to the Sluice API (set after deploy: "
            "`sluice token create --queue '*' --scope read --scope write`, see docs/deploy.md)",
        )
        NagSuppressions.add_resource_suppressions(
            self.token_secret,
            [
                {
                    "id": "AwsSolutions-SMG4",
                    "reason": "The value is a Sluice API token, not an AWS credential: it is rotated by "
                    "creating a new token with the CLI and revoking the old one (docs/deploy.md).",
                }
            ],
        )

        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("glue.amazonaws.com"),
            description="Sluice Glue jobs: read segments, write exports, call the API with a token",
        )
        for asset in [self.code, *self.scripts.values()]:
            self.role.add_to_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject"], resources=[asset.bucket.arn_for_objects(asset.s3_object_key)]
                )
            )
        self.role.add_to_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn]))
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{SEGMENTS_PREFIX}*")]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
                resources=[
                    bucket.arn_for_objects(f"{EXPORTS_PREFIX}*"),
                    bucket.arn_for_objects(f"{GLUE_TMP_PREFIX}*"),
                ],
            )
        )
        self.token_secret.grant_read(self.role)
        glue_logs = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name="/aws-glue/*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[glue_logs],
            )
        )
        NagSuppressions.add_resource_suppressions(
            self.role,
            [
                iam5(
                    "Segment, export and Glue temp object keys are created at runtime; each grant is limited "
                    "to one prefix of this stack's segment bucket.",
                    *(
                        finding(stack, bucket.arn_for_objects(f"{prefix}*"))
                        for prefix in (SEGMENTS_PREFIX, EXPORTS_PREFIX, GLUE_TMP_PREFIX)
                    ),
                ),
                iam5(
                    "Glue writes driver/executor logs to log groups under /aws-glue/ whose streams are named "
                    "per job run at runtime.",
                    finding(stack, glue_logs),
                ),
            ],
            apply_to_children=True,
        )

        base_args = {
            "--job-language": "python",
            "--extra-py-files": self.code.s3_object_url,
            "--TempDir": bucket.s3_url_for_object(GLUE_TMP_PREFIX),
            "--enable-continuous-cloudwatch-log": "true",
            # Progress lives in Sluice itself (acks, offsets), not in Glue bookmarks.
            "--job-bookmark-option": "job-bookmark-disable",
            "--sluice_api_url": api_url,
            "--sluice_token_secret_arn": self.token_secret.secret_arn,
            "--sluice_segment_bucket": bucket.bucket_name,
            "--sluice_output_path": bucket.s3_url_for_object(f"{EXPORTS_PREFIX}{stage}/"),
        }
        self.jobs: dict[str, glue.CfnJob] = {}
        for name, script in self.scripts.items():
            for suffix, version in GLUE_VERSIONS.items():
                job = glue.CfnJob(
                    self,
                    f"{_title(name)}{_title(suffix)}",
                    name=f"sluice-{stage}-{name}-{suffix}",
                    description=f"Sluice {name} on Glue {version}",
                    role=self.role.role_arn,
                    glue_version=version,
                    command=glue.CfnJob.JobCommandProperty(
                        name="glueetl", python_version="3", script_location=script.s3_object_url
                    ),
                    default_arguments=base_args,
                    worker_type="G.1X",
                    number_of_workers=2,
                    max_retries=0,
                    timeout=120,
                )
                self.jobs[f"{name}-{suffix}"] = job
                NagSuppressions.add_resource_suppressions(
                    job,
                    [
                        {
                            "id": "AwsSolutions-GL1",
                            "reason": "Job logs carry no message bodies and are encrypted at rest by "
                            "CloudWatch Logs; a customer-managed KMS key is an opt-in hardening step "
                            "(docs/deploy.md), not a default cost.",
                        },
                        {
                            "id": "AwsSolutions-GL3",
                            "reason": "Job bookmarks are disabled (--job-bookmark-option "
                            "job-bookmark-disable): progress is kept by Sluice acks and offsets, so "
                            "there is nothing to encrypt.",
                        },
                    ],
                )


def _title(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[-_]", name))
