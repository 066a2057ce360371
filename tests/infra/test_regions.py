"""Multi-region synthesis (`-c regions=us-east-1,eu-west-1`): one stack per region, the control table a
global table in the home stack, deterministic names, every function told every region, least-privilege
grants across regions (judged with the IAM evaluator the call audit uses), schedules, SnapStart and
cdk-nag in each region; and the single-region stack unchanged without the context.

One app with both stacks is synthesized for this module (≈ 15 s).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sluice import constants as c
from sluice.local import iamcheck
from sluice.local.callaudit import LOCAL_ACCOUNT
from sluice.local.template import api_targets_from_template
from sluice.settings import Settings
from tests.infra.helpers import function_ids, of_type

pytestmark = pytest.mark.infra

HOME, OTHER = "us-east-1", "eu-west-1"
REGIONS = (HOME, OTHER)
CONTEXT = {"regions": f"{HOME},{OTHER}"}
STAGE = c.DEFAULT_STAGE
SHAPE_FILE = Path(__file__).with_name("single_region_shape.txt")
VERSION_HASH = re.compile(r"CurrentVersion([0-9A-F]{8})[0-9a-f]{32}$")


@pytest.fixture(scope="module")
def multi(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any]]:
    from app import build_stacks

    return build_stacks(CONTEXT, outdir=str(tmp_path_factory.mktemp("cdk.out.regions")))


@pytest.fixture(scope="module")
def stacks(multi: tuple[Any, dict[str, Any]]) -> dict[str, Any]:
    return multi[1]


@pytest.fixture(scope="module")
def templates(stacks: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from aws_cdk.assertions import Template

    return {region: Template.from_stack(stack).to_json() for region, stack in stacks.items()}


def res(templates: dict[str, dict[str, Any]], region: str) -> dict[str, Any]:
    return templates[region]["Resources"]


def roles(templates: dict[str, dict[str, Any]], region: str) -> iamcheck.TemplateRoles:
    """The template's roles resolved as the call audit resolves them (account: LOCAL_ACCOUNT)."""
    return iamcheck.TemplateRoles(templates[region], STAGE, region)


def may(templates: dict[str, Any], region: str, function: str, action: str, arn: str) -> bool:
    view = roles(templates, region)
    role = view.role_of(function)
    assert role
    return iamcheck.allowed(view.statements(role), action, arn)


def table_arn(region: str, name: str) -> str:
    return f"arn:aws:dynamodb:{region}:{LOCAL_ACCOUNT}:table/{name}"


def bucket(region: str) -> str:
    return c.physical_name(STAGE, c.LOGICAL_SEGMENT_BUCKET, account=LOCAL_ACCOUNT, region=region)


def ssm_arn(region: str) -> str:
    prefix = c.SHARD_MAP_PREFIX_TEMPLATE.format(stage=STAGE).lstrip("/")
    return f"arn:aws:ssm:{region}:{LOCAL_ACCOUNT}:parameter/{prefix}/orders"


CONTROL = c.physical_name(STAGE, c.LOGICAL_CONTROL_TABLE)
SHARD0 = c.physical_name(STAGE, f"{c.LOGICAL_SHARD_TABLE_PREFIX}0")


# -- stacks ---------------------------------------------------------------------------------------------
def test_one_stack_per_region_home_first_with_region_set_and_account_unresolved(
    stacks: dict[str, Any],
) -> None:
    from aws_cdk import Token

    assert list(stacks) == list(REGIONS)
    for region, stack in stacks.items():
        assert stack.artifact_id == c.stack_id(region) == f"SluiceStack-{region}"
        assert stack.stack_name == f"sluice-{STAGE}-{region}"
        assert stack.region == region
        assert Token.is_unresolved(stack.account)  # credential-free synth
    assert stacks[OTHER].dependencies == [stacks[HOME]]
    assert stacks[HOME].dependencies == []


def test_every_region_has_its_own_api_functions_tables_bucket_and_schedule(
    templates: dict[str, Any],
) -> None:
    for region in REGIONS:
        resources = res(templates, region)
        assert set(function_ids(resources)) == set(c.FUNCTION_HANDLERS)
        assert len(of_type(resources, "AWS::ApiGatewayV2::Api")) == 1
        tables = of_type(resources, "AWS::DynamoDB::Table")
        assert {t["Properties"]["TableName"] for t in tables.values()} == {
            c.physical_name(STAGE, f"{c.LOGICAL_SHARD_TABLE_PREFIX}{i}")
            for i in range(c.DEFAULT_SHARD_TABLE_COUNT)
        }
        assert roles(templates, region).resolve({"Ref": c.LOGICAL_SEGMENT_BUCKET}) == bucket(region)
        (rule,) = [
            r["Properties"]
            for r in of_type(resources, "AWS::Events::Rule").values()
            if "ScheduleExpression" in r["Properties"]
        ]
        coordinator = function_ids(resources)[c.FN_COORDINATOR]
        assert rule["Targets"][0]["Arn"] == {"Fn::GetAtt": [coordinator, "Arn"]}
        env = resources[coordinator]["Properties"]["Environment"]["Variables"]
        assert set(c.SCHEDULE_ENV) <= set(env)


def test_the_control_table_is_a_global_table_in_the_home_stack_replicated_to_the_other_region(
    templates: dict[str, Any],
) -> None:
    home = of_type(res(templates, HOME), "AWS::DynamoDB::GlobalTable")
    assert list(home) == [c.LOGICAL_CONTROL_TABLE]
    props = home[c.LOGICAL_CONTROL_TABLE]["Properties"]
    assert props["TableName"] == CONTROL
    assert {r["Region"] for r in props["Replicas"]} == set(REGIONS)
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["TimeToLiveSpecification"] == {"AttributeName": c.TTL_ATTRIBUTE, "Enabled": True}
    assert [k["AttributeName"] for k in props["KeySchema"]] == [c.PARTITION_KEY, c.SORT_KEY]
    for replica in props["Replicas"]:
        assert replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    other = res(templates, OTHER)
    assert not of_type(other, "AWS::DynamoDB::GlobalTable")  # the replica belongs to the home stack
    assert c.LOGICAL_CONTROL_TABLE not in other


def test_the_lease_key_secret_lives_in_the_home_stack_and_is_replicated(templates: dict[str, Any]) -> None:
    secret = res(templates, HOME)[c.LOGICAL_LEASE_KEY_SECRET]["Properties"]
    assert secret["Name"] == c.physical_name(STAGE, c.LOGICAL_LEASE_KEY_SECRET)
    assert secret["ReplicaRegions"] == [{"Region": OTHER}]
    assert c.LOGICAL_LEASE_KEY_SECRET not in res(templates, OTHER)
    for region in REGIONS:  # what `sluice lease-key rotate --secret-id` is given, in any region
        assert templates[region]["Outputs"]["LeaseKeySecretArn"]["Value"] == secret["Name"]


def test_dashboards_are_named_per_region(templates: dict[str, Any]) -> None:
    names = {
        region: d["Properties"]["DashboardName"]
        for region in REGIONS
        for d in of_type(res(templates, region), "AWS::CloudWatch::Dashboard").values()
    }
    assert names == {r: f"sluice-{STAGE}-{r}" for r in REGIONS}  # dashboard names are account-wide


# -- environment ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("region", REGIONS)
def test_every_function_is_told_every_region_and_every_bucket(templates: dict[str, Any], region: str) -> None:
    view = roles(templates, region)
    resources = res(templates, region)
    for name, lid in function_ids(resources).items():
        env = {
            k: str(v)
            for k, v in view.resolve(resources[lid]["Properties"]["Environment"]["Variables"]).items()
        }
        settings = Settings.from_env(env)
        assert settings.regions == list(REGIONS), name
        assert settings.region == region
        assert settings.home_region == HOME
        assert settings.segment_buckets == {r: bucket(r) for r in REGIONS}
        assert settings.segment_bucket == settings.bucket_in(region) == bucket(region)
        assert settings.control_table == CONTROL
        assert settings.shard_tables[0] == SHARD0
        assert settings.lease_key_secret == c.physical_name(STAGE, c.LOGICAL_LEASE_KEY_SECRET)


# -- grants (judged as the IAM call audit judges recorded calls) -----------------------------------------
@pytest.mark.parametrize("region", REGIONS)
def test_control_table_writes_go_to_home_and_only_the_broker_writes_its_replica(
    templates: dict[str, Any], region: str
) -> None:
    for fn in c.FUNCTION_HANDLERS:
        home_writes = [
            w
            for w in ("PutItem", "UpdateItem")
            if may(templates, region, fn, f"dynamodb:{w}", table_arn(HOME, CONTROL))
        ]
        assert home_writes, fn
        # this region's replica: token lookups (broker, consumer); the others read the home table
        replica_reader = region == HOME or fn in (c.FN_BROKER, c.FN_CONSUMER)
        assert may(templates, region, fn, "dynamodb:GetItem", table_arn(region, CONTROL)) == replica_reader, (
            fn
        )
    if region != HOME:
        assert may(templates, region, c.FN_BROKER, "dynamodb:PutItem", table_arn(region, CONTROL))
        for fn in (c.FN_CONSUMER, c.FN_SHARD, c.FN_COORDINATOR):
            assert not may(templates, region, fn, "dynamodb:PutItem", table_arn(region, CONTROL)), fn


@pytest.mark.parametrize("region", REGIONS)
def test_broker_and_consumer_use_every_regions_shards_coordinator_and_shard_only_their_own(
    templates: dict[str, Any], region: str
) -> None:
    (other,) = [r for r in REGIONS if r != region]
    for fn in c.FUNCTION_HANDLERS:
        assert may(templates, region, fn, "dynamodb:UpdateItem", table_arn(region, SHARD0)), fn
        everywhere = fn in (c.FN_BROKER, c.FN_CONSUMER)
        assert may(templates, region, fn, "dynamodb:UpdateItem", table_arn(other, SHARD0)) == everywhere, fn
    assert not may(templates, region, c.FN_BROKER, "dynamodb:PutItem", table_arn(region, "someone-elses"))


@pytest.mark.parametrize("region", REGIONS)
def test_segment_buckets_across_regions(templates: dict[str, Any], region: str) -> None:
    (other,) = [r for r in REGIONS if r != region]
    segment = "segments/q/1/0/00000001"
    for b in (bucket(region), bucket(other)):
        arn = f"arn:aws:s3:::{b}"
        assert may(templates, region, c.FN_CONSUMER, "s3:GetObject", f"{arn}/{segment}")
        assert not may(templates, region, c.FN_CONSUMER, "s3:ListBucket", arn)  # nothing lists
        assert may(templates, region, c.FN_BROKER, "s3:PutObject", f"{arn}/{c.OVERFLOW_PREFIX}x")
        assert not may(templates, region, c.FN_BROKER, "s3:PutObject", f"{arn}/{segment}")
    own, remote = f"arn:aws:s3:::{bucket(region)}", f"arn:aws:s3:::{bucket(other)}"
    assert may(templates, region, c.FN_SHARD, "s3:PutObject", f"{own}/{segment}")
    assert not may(templates, region, c.FN_SHARD, "s3:PutObject", f"{remote}/{segment}")
    assert not may(templates, region, c.FN_COORDINATOR, "s3:GetObject", f"{own}/{segment}")


@pytest.mark.parametrize("region", REGIONS)
def test_shard_maps_are_written_in_every_region_and_read_in_ones_own(
    templates: dict[str, Any], region: str
) -> None:
    (other,) = [r for r in REGIONS if r != region]
    for r in REGIONS:
        assert may(templates, region, c.FN_BROKER, "ssm:PutParameter", ssm_arn(r))
        assert may(templates, region, c.FN_BROKER, "ssm:DeleteParameters", ssm_arn(r))
        assert may(templates, region, c.FN_COORDINATOR, "ssm:PutParameter", ssm_arn(r))
        # it prunes lingering mirrors of deleted queues in its own region only
        assert may(templates, region, c.FN_COORDINATOR, "ssm:DeleteParameters", ssm_arn(r)) == (r == region)
    assert may(templates, region, c.FN_CONSUMER, "ssm:GetParameter", ssm_arn(region))
    assert not may(templates, region, c.FN_CONSUMER, "ssm:GetParameter", ssm_arn(other))
    assert not may(templates, region, c.FN_CONSUMER, "ssm:PutParameter", ssm_arn(region))
    assert not may(templates, region, c.FN_SHARD, "ssm:GetParameter", ssm_arn(region))


@pytest.mark.parametrize("region", REGIONS)
def test_the_lease_key_replica_of_ones_own_region_is_readable(templates: dict[str, Any], region: str) -> None:
    (other,) = [r for r in REGIONS if r != region]
    name = c.physical_name(STAGE, c.LOGICAL_LEASE_KEY_SECRET)
    secret = f"arn:aws:secretsmanager:{{}}:{LOCAL_ACCOUNT}:secret:{name}-AbC123"
    for fn in (c.FN_BROKER, c.FN_CONSUMER):
        assert may(templates, region, fn, "secretsmanager:GetSecretValue", secret.format(region)), fn
        assert not may(templates, region, fn, "secretsmanager:GetSecretValue", secret.format(other)), fn
    assert not may(templates, region, c.FN_SHARD, "secretsmanager:GetSecretValue", secret.format(region))


@pytest.mark.parametrize("region", REGIONS)
def test_the_coordinator_starts_only_its_own_regions_functions(
    templates: dict[str, Any], region: str
) -> None:
    (other,) = [r for r in REGIONS if r != region]
    fn = f"arn:aws:lambda:{{}}:{LOCAL_ACCOUNT}:function:sluice-{STAGE}-{{}}"
    action = "lambda:InvokeFunction"
    assert may(templates, region, c.FN_COORDINATOR, action, fn.format(region, c.FN_SHARD))
    assert may(templates, region, c.FN_COORDINATOR, action, fn.format(region, c.FN_CONSUMER) + ":live")
    assert not may(templates, region, c.FN_COORDINATOR, action, fn.format(other, c.FN_SHARD))


# -- SnapStart and cdk-nag per region ------------------------------------------------------------------
@pytest.mark.parametrize("region", REGIONS)
def test_every_route_goes_through_the_snapstart_alias(templates: dict[str, Any], region: str) -> None:
    targets = api_targets_from_template(templates[region])
    assert set(targets) == {route.route_key for route in c.ROUTES}
    for route in c.ROUTES:
        target = targets[route.route_key]
        assert (target.function, target.alias, target.snap_start) == (route.function, c.API_ALIAS, True)


@pytest.mark.parametrize("region", REGIONS)
def test_cdk_nag_has_no_unsuppressed_finding(stacks: dict[str, Any], templates: Any, region: str) -> None:
    from aws_cdk.assertions import Annotations, Match

    nag = Match.string_like_regexp("AwsSolutions-.*")
    annotations = Annotations.from_stack(stacks[region])
    annotations.has_no_error("*", nag)
    annotations.has_no_warning("*", nag)


# -- without the context: today's single stack --------------------------------------------------------------
def shape(cfn: dict[str, Any]) -> list[str]:
    masked = r"CurrentVersion\1<code>"
    rows = [f"resource {VERSION_HASH.sub(masked, lid)} {r['Type']}" for lid, r in cfn["Resources"].items()]
    return (
        sorted(rows)
        + sorted(f"output {o}" for o in cfn["Outputs"])
        + sorted(f"parameter {p}" for p in cfn.get("Parameters", {}))
    )


def test_without_regions_the_single_stack_is_unchanged(stack: Any, cfn: dict[str, Any]) -> None:
    expected = [line for line in SHAPE_FILE.read_text().splitlines() if not line.startswith("#")]
    assert shape(cfn) == expected
    assert stack.artifact_id == c.STACK_ID and stack.stack_name == f"sluice-{STAGE}"
    resources = cfn["Resources"]
    assert resources[c.LOGICAL_CONTROL_TABLE]["Type"] == "AWS::DynamoDB::Table"
    for lid in (c.LOGICAL_CONTROL_TABLE, f"{c.LOGICAL_SHARD_TABLE_PREFIX}0"):  # named as in every region
        assert resources[lid]["Properties"]["TableName"] == c.physical_name(STAGE, lid)
    assert "Name" not in resources[c.LOGICAL_LEASE_KEY_SECRET]["Properties"]
    for lid in function_ids(resources).values():
        env = resources[lid]["Properties"]["Environment"]["Variables"]
        assert not {c.ENV_REGIONS, c.ENV_REGION, c.ENV_SEGMENT_BUCKETS} & set(env)


# -- config ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("regions", "stage", "message"),
    [
        ("us-east-1", "dev", "two or more"),
        ("us-east-1,us-east-1", "dev", "two or more"),
        ("us-east-1,Europe", "dev", "not a region name"),
        ("us-east-1,ap-southeast-2", "a-twenty-char-stage0", "shorter stage"),
    ],
)
def test_bad_regions_are_refused(regions: str, stage: str, message: str) -> None:
    from stacks.config import SluiceConfig

    with pytest.raises(ValueError, match=message):
        SluiceConfig(regions=regions, stage=stage).validate()
    assert SluiceConfig(regions=f" {HOME} , {OTHER} ").region_list == list(REGIONS)


# -- the local runtime's view: templates per region, calls judged by the caller's region -------------------
def test_a_call_is_judged_by_the_role_of_the_callers_region(
    templates: dict[str, Any], tmp_path: Path
) -> None:
    """The same call (an update of a us-east-1 shard table) from each region's coordinator and consumer:
    only the coordinator of us-east-1 and the consumers may make it."""
    import json

    query = table_arn(HOME, SHARD0)
    lines = [
        {"function": fn, "stage": STAGE, "region": HOME, "action": "dynamodb:UpdateItem", "resource": query}
        | {"caller_region": caller, "regions": CONTEXT["regions"]}
        for fn in (c.FN_COORDINATOR, c.FN_CONSUMER)
        for caller in REGIONS
    ]
    path = tmp_path / "calls.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    calls = iamcheck.load_calls(path)
    asked: list[tuple[str, str | None, str | None]] = []

    def template_for(stage: str, regions: str | None = None, region: str | None = None) -> dict[str, Any]:
        asked.append((stage, regions, region))
        assert regions == CONTEXT["regions"] and region
        return templates[region]

    denials = iamcheck.check(calls, template_for)
    assert [(d.call.function, d.call.caller_region) for d in denials] == [(c.FN_COORDINATOR, OTHER)]
    assert sorted(set(asked)) == sorted((STAGE, CONTEXT["regions"], r) for r in REGIONS)


def test_template_lookup_per_region_without_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One synthesis writes every region's template; each is read by region (default: home), a region
    the context does not list is refused, and a missing region template makes the cache stale."""
    import json

    from sluice.local import template as tpl

    root = tmp_path / "repo"
    (root / "stacks").mkdir(parents=True)
    (root / "app.py").write_text("")
    monkeypatch.setenv("SLUICE_REPO_ROOT", str(root))
    monkeypatch.setattr(tpl.shutil, "which", lambda _: None)  # a synthesis would fail: none may start
    outdir = tpl.outdir_for(root, CONTEXT)
    outdir.mkdir(parents=True)
    (outdir / tpl.HASH_FILE).write_text(tpl.input_hash(root, CONTEXT) + "\n")
    for region in REGIONS:
        (outdir / f"SluiceStack-{region}.template.json").write_text(json.dumps({"Description": region}))

    assert tpl.template_names(CONTEXT) == [f"SluiceStack-{r}.template.json" for r in REGIONS]
    assert tpl.load_template(CONTEXT)["Description"] == HOME
    assert tpl.load_template(CONTEXT, region=OTHER)["Description"] == OTHER
    assert {r: t["Description"] for r, t in tpl.region_templates(CONTEXT).items()} == {r: r for r in REGIONS}
    with pytest.raises(tpl.TemplateUnavailable, match="not one of"):
        tpl.load_template(CONTEXT, region="ap-south-1")
    (outdir / f"SluiceStack-{OTHER}.template.json").unlink()
    with pytest.raises(tpl.TemplateUnavailable, match=r"Node\.js"):
        tpl.load_template(CONTEXT, region=HOME)


def test_the_local_runtime_can_provision_the_home_template(
    moto_endpoint: str, templates: dict[str, Any]
) -> None:
    """provision() reads the global table (`AWS::DynamoDB::GlobalTable`) like a plain table."""
    import boto3

    from sluice.local.provision import provision

    settings = provision(moto_endpoint, stage="mr1", template=templates[HOME])
    assert settings.control_table == c.physical_name("mr1", c.LOGICAL_CONTROL_TABLE)
    ddb = boto3.client("dynamodb", endpoint_url=moto_endpoint)
    desc = ddb.describe_table(TableName=settings.control_table)["Table"]
    assert [k["AttributeName"] for k in desc["KeySchema"]] == [c.PARTITION_KEY, c.SORT_KEY]
    ttl = ddb.describe_time_to_live(TableName=settings.control_table)["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": c.TTL_ATTRIBUTE}
