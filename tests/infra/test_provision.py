"""The local runtime provisions moto from the synthesized template."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from sluice import constants as c
from sluice.local import template as tpl
from sluice.local.provision import local_name, provision
from sluice.settings import Settings

pytestmark = pytest.mark.infra


def test_provision_creates_what_the_template_defines(moto_endpoint: str, cfn: dict[str, Any]) -> None:
    settings = provision(moto_endpoint, stage="t1", template=cfn)
    ddb = boto3.client("dynamodb", endpoint_url=moto_endpoint)
    template_tables = [lid for lid, r in cfn["Resources"].items() if r["Type"] == "AWS::DynamoDB::Table"]
    # moto's backends are process-wide: other tests' runtimes may have tables on it too.
    created = {t for t in ddb.list_tables()["TableNames"] if t.startswith("sluice-t1-")}
    assert created == {local_name("t1", lid) for lid in template_tables}
    for lid in template_tables:
        name = local_name("t1", lid)
        desc = ddb.describe_table(TableName=name)["Table"]
        assert desc["KeySchema"] == cfn["Resources"][lid]["Properties"]["KeySchema"]
        assert desc["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        ttl = ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": c.TTL_ATTRIBUTE}
    s3 = boto3.client("s3", endpoint_url=moto_endpoint)
    s3.head_bucket(Bucket=settings.segment_bucket)

    assert settings.control_table == "sluice-t1-control"
    assert settings.shard_tables == [f"sluice-t1-shards-{i}" for i in range(c.DEFAULT_SHARD_TABLE_COUNT)]
    assert settings.shard_map_prefix == c.SHARD_MAP_PREFIX_TEMPLATE.format(stage="t1")
    assert Settings.from_env(settings.to_env()) == settings

    # Idempotent, and a smaller shard count uses a prefix of the template's shard tables.
    again = provision(moto_endpoint, stage="t1", shard_table_count=2, template=cfn)
    assert again.shard_tables == settings.shard_tables[:2]


def test_provision_from_the_cached_template(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No template passed: load_template() synthesizes once (≈ 15 s) or reuses cdk.out. Checked by what
    it runs, not by how long it takes (a 2 s bound failed on a loaded CI machine)."""
    settings = provision(moto_endpoint, stage="t2")
    assert len(settings.shard_tables) == c.DEFAULT_SHARD_TABLE_COUNT
    root = tpl.repo_root()
    assert tpl.is_fresh(tpl.outdir_for(root), tpl.input_hash(root))

    def no_synth(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a current template is not re-synthesized")

    monkeypatch.setattr(tpl.subprocess, "run", no_synth)
    assert tpl.load_template()["Resources"]


def test_missing_node_fails_with_a_clear_message(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "app.py").write_text("")
    monkeypatch.setattr(tpl.shutil, "which", lambda _: None)
    with pytest.raises(tpl.TemplateUnavailable, match=r"Node\.js"):
        tpl.synth(root=tmp_path)
