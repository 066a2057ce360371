"""The function factory: one code asset, one layer, one environment mapping for every Lambda.

- Code: `sluice/` and `lambdas/` copied into a staging folder (no Docker, no pip), less what no handler
  imports (`NOT_DEPLOYED`: the local runtime, the CLI and its client with its batching producer, the demo,
  the OpenAPI generator):
  the asset holds only our code that Lambda runs (tests/infra/test_asset.py checks both ways).
  Third-party imports come from the runtime (boto3) and the Powertools public layer.
- Layer: Powertools' public layer `AWSLambdaPowertoolsPythonV3-python312-arm64`, published by AWS
  account 017000801446. It is built with `aws-lambda-powertools[all]` inside the Lambda python3.12 arm64
  image, so it also carries pydantic v2 (+ its compiled pydantic_core for arm64), fastjsonschema,
  aws-xray-sdk and the other extras: exactly the third-party code `sluice` needs, with no bundling step.
  The ARN is resolved at deploy time from AWS's public SSM parameter
  `/aws/service/powertools/python/arm64/python3.12/<version>` for the version pinned in pyproject.toml,
  so the layer matches our pin in every region. Fallbacks when that parameter is missing in a region
  (docs/deploy.md): context `powertools_layer_version` (the layer's version number, made into this
  region's ARN) or `powertools_layer_arn` (an explicit ARN; wins over both).
- Logs: one log group per function with a generated name (`fn.log_group.log_group_name`), removed with
  the stack unless data is retained: a destroyed stage deploys again without name collisions.
- Cold start: the functions behind the HTTP API (`constants.API_FUNCTIONS`) run with SnapStart, which
  snapshots a published version after its init; each gets the alias `constants.API_ALIAS` on its
  current version (`self.aliases`), and the API invokes that alias. A new version is published whenever
  anything the function loads changes: code and configuration (CDK hashes them into the version's id)
  and the layer ARN resolved at deploy time (named in the version's description). Their after-restore
  hooks are in `lambdas/common/restore.py`.
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Aws, Duration, Fn, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from cdk_nag import NagSuppressions
from constructs import Construct

from sluice import constants as c
from sluice.settings import Settings

REPO_ROOT = Path(__file__).resolve().parent.parent
CODE_DIRS = ("sluice", "lambdas")
# Under CODE_DIRS but never imported by a handler: what `sluice local`, the CLI and the docs build use.
NOT_DEPLOYED = (
    "sluice/local",
    "sluice/cli.py",
    "sluice/client.py",
    "sluice/producer.py",
    "sluice/demo.py",
    "sluice/engine/store/memory.py",  # the shard store of the engine's unit tests
    "lambdas/common/openapi.py",
)
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
POWERTOOLS_ACCOUNT = "017000801446"
POWERTOOLS_LAYER_NAME = "AWSLambdaPowertoolsPythonV3-python312-arm64"
POWERTOOLS_SSM_TEMPLATE = "/aws/service/powertools/python/arm64/python3.12/{version}"


@dataclass(frozen=True)
class FunctionSpec:
    timeout: Duration
    description: str


# Per-function sizing. Broker and consumer sit behind API Gateway (29 s integration limit; long-poll
# pulls wait at most 20 s); the coordinator runs every minute and may loop inside one invocation.
SPECS: dict[str, FunctionSpec] = {
    c.FN_BROKER: FunctionSpec(Duration.seconds(29), "Sluice broker: queue admin, tokens, send/publish"),
    c.FN_CONSUMER: FunctionSpec(Duration.seconds(29), "Sluice consumer: pull/ack/lease, reads, push"),
    c.FN_SHARD: FunctionSpec(Duration.minutes(5), "Sluice shard: flush to S3 segments, compaction, gaps"),
    c.FN_COORDINATOR: FunctionSpec(Duration.seconds(70), "Sluice coordinator: scaling, sealing, retention"),
}


def pinned_powertools_version(pyproject: Path = REPO_ROOT / "pyproject.toml") -> str:
    """The aws-lambda-powertools version pinned in pyproject.toml (the layer must match it)."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    for dep in deps:
        m = re.fullmatch(r"aws-lambda-powertools(\[[^\]]*\])?==([\w.]+)", dep.replace(" ", ""))
        if m:
            return m.group(2)
    raise ValueError("aws-lambda-powertools is not pinned with == in pyproject.toml")


_staging_root: Path | None = None


def stage_code(root: Path = REPO_ROOT) -> Path:
    """Copy `sluice/` and `lambdas/` less NOT_DEPLOYED and caches to a fresh folder; CDK hashes and
    zips it."""
    global _staging_root
    if _staging_root is None:
        _staging_root = Path(tempfile.mkdtemp(prefix="sluice-lambda-src-"))
        atexit.register(shutil.rmtree, _staging_root, True)
    target = Path(tempfile.mkdtemp(dir=_staging_root))
    caches = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".pytest_cache", ".ruff_cache")

    def ignore(directory: str, names: list[str]) -> set[str]:
        folder = Path(directory).relative_to(root).as_posix()
        return set(caches(directory, names)) | {n for n in names if f"{folder}/{n}" in NOT_DEPLOYED}

    for name in CODE_DIRS:
        shutil.copytree(root / name, target / name, ignore=ignore)
    return target


def base_environment(
    *,
    control_table: str,
    shard_tables: list[str],
    segment_bucket: str,
    shard_map_prefix: str,
    stage: str,
    lease_key_secret: str,
    regions: list[str] | None = None,
    region: str | None = None,
    segment_buckets: dict[str, str] | None = None,
) -> dict[str, str]:
    """The one environment mapping every function gets; `Settings.from_env` reads it back. A
    multi-region stack adds every region (home first), its own, and every region's segment bucket."""
    defaults = Settings.model_fields
    env = {
        c.ENV_CONTROL_TABLE: control_table,
        c.ENV_SHARD_TABLES: Fn.join(",", shard_tables),
        c.ENV_SEGMENT_BUCKET: segment_bucket,
        c.ENV_SHARD_MAP_PREFIX: shard_map_prefix,
        c.ENV_TOKEN_CACHE_TTL: str(defaults["token_cache_ttl_seconds"].default),
        c.ENV_STAGE: stage,
        c.ENV_LEASE_KEY_SECRET: lease_key_secret,
        c.ENV_LEASE_KEY_CACHE_TTL: str(defaults["lease_key_cache_ttl_seconds"].default),
        c.ENV_POWERTOOLS_SERVICE_NAME: c.SERVICE_NAME,
        c.ENV_POWERTOOLS_METRICS_NAMESPACE: c.METRICS_NAMESPACE,
    }
    if regions:
        assert region and segment_buckets, "a multi-region environment names its region and every bucket"
        env[c.ENV_REGIONS] = ",".join(regions)
        env[c.ENV_REGION] = region
        env[c.ENV_SEGMENT_BUCKETS] = Fn.join(",", [f"{r}={segment_buckets[r]}" for r in regions])
    return env


class FunctionFactory(Construct):
    """Builds the four functions of `constants.FUNCTION_HANDLERS` the same way, each with its own
    role (no managed policies: grants are added per function in `stacks.access`) and log group, its
    memory (`memory_mb`: function name -> MB) and the concurrency reserved for it, if any."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        environment: dict[str, str],
        log_retention_days: int,
        memory_mb: dict[str, int],
        reserved_concurrency: dict[str, int] | None = None,
        powertools_layer_arn: str = "",
        powertools_version: str = "",
        powertools_layer_version: int = 0,
        retain_logs: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        self.stage = stage
        self.environment = environment
        self.memory_mb = memory_mb
        self.reserved_concurrency = reserved_concurrency or {}
        self.retention = log_retention(log_retention_days)
        self.log_removal = log_removal_policy(retain_logs)
        self.code = lambda_.Code.from_asset(str(stage_code()))
        if not powertools_layer_arn and powertools_layer_version:
            powertools_layer_arn = (
                f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{POWERTOOLS_ACCOUNT}:layer:"
                f"{POWERTOOLS_LAYER_NAME}:{powertools_layer_version}"
            )
        if not powertools_layer_arn:
            version = powertools_version or pinned_powertools_version()
            powertools_layer_arn = ssm.StringParameter.value_for_string_parameter(
                self, POWERTOOLS_SSM_TEMPLATE.format(version=version)
            )
        self.layer = lambda_.LayerVersion.from_layer_version_arn(
            self, "PowertoolsLayer", powertools_layer_arn
        )
        self.functions: dict[str, lambda_.Function] = {}
        self.aliases: dict[str, lambda_.Alias] = {}

    def create_all(self) -> dict[str, lambda_.Function]:
        for name in c.FUNCTION_HANDLERS:
            self.functions[name] = self.create(name)
        return self.functions

    def api_targets(self) -> dict[str, lambda_.IFunction]:
        """What the HTTP API invokes: the SnapStart alias of each function behind it."""
        return {name: self.aliases[name] for name in sorted(c.API_FUNCTIONS)}

    def create(self, name: str) -> lambda_.Function:
        title = name.capitalize()
        spec = SPECS[name]
        snap_start = name in c.API_FUNCTIONS
        log_group = logs.LogGroup(
            self, f"{title}Logs", retention=self.retention, removal_policy=self.log_removal
        )
        role = iam.Role(
            self,
            f"{title}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Sluice {name} function (least privilege, see stacks/access.py)",
        )
        log_group.grant_write(role)
        fn = lambda_.Function(
            self,
            f"{title}Function",
            function_name=f"sluice-{self.stage}-{name}",
            description=spec.description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=c.FUNCTION_HANDLERS[name],
            code=self.code,
            layers=[self.layer],
            environment=dict(self.environment),
            memory_size=self.memory_mb[name],
            reserved_concurrent_executions=self.reserved_concurrency.get(name),
            timeout=spec.timeout,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            role=role,
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if snap_start else None,
            # The version's id hashes the template, which holds the layer ARN as a deploy-time SSM value
            # (`powertools_version=latest` changes it while the template stays): naming that value in
            # the version's description makes a new value replace the version, so it is published and
            # snapshotted with the layer the function now loads.
            current_version_options=(
                lambda_.VersionOptions(description=f"layer {self.layer.layer_version_arn}")
                if snap_start
                else None
            ),
        )
        fn.node.add_dependency(log_group)
        if snap_start:
            # current_version is a new AWS::Lambda::Version whenever code or configuration changes,
            # so every deploy snapshots the new code and moves the alias onto it.
            self.aliases[name] = lambda_.Alias(
                self, f"{title}Alias", alias_name=c.API_ALIAS, version=fn.current_version
            )
        NagSuppressions.add_resource_suppressions(
            fn,
            [
                {
                    "id": "AwsSolutions-L1",
                    "reason": "python3.12 is pinned on purpose: the Powertools public layer "
                    f"{POWERTOOLS_LAYER_NAME} ships pydantic_core compiled for CPython 3.12/arm64, so "
                    "the runtime and the layer move together (both named in stacks/functions.py).",
                }
            ],
        )
        return fn


# CloudWatch Logs accepts only these retention periods (days); context values round up to the next.
_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)


def log_removal_policy(retain: bool) -> RemovalPolicy:
    """Log groups follow the data: kept on `cdk destroy` only when the stage keeps its data. Their
    names are generated, so a kept log group never blocks deploying the stage again."""
    return RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY


def log_retention(days: int) -> logs.RetentionDays:
    members = [r for r in logs.RetentionDays if r is not logs.RetentionDays.INFINITE]
    for allowed, member in zip(_RETENTION_DAYS, members, strict=True):
        if allowed >= days:
            return member
    return members[-1]
