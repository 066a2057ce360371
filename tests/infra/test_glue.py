"""Glue jobs: both scripts in Glue 5.0 and 6.0, one zip of the code they import in --extra-py-files (the
very file tests/spark/test_glue_artifact.py runs with `spark-submit --py-files`), nothing from PyPI."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from sluice import constants as c
from stacks.glue import GLUE_VERSIONS, JOB_SCRIPTS
from stacks.glue_artifact import REPO_ROOT, build_glue_artifact
from tests.infra.helpers import literal, of_type

pytestmark = pytest.mark.infra


def test_each_script_has_a_glue5_and_glue6_job(resources: dict[str, Any]) -> None:
    jobs = [j["Properties"] for j in of_type(resources, "AWS::Glue::Job").values()]
    seen = {(j["Name"].rsplit("-", 1)[0].split("-", 2)[-1], j["GlueVersion"]) for j in jobs}
    assert seen == {(name, v) for name in JOB_SCRIPTS for v in GLUE_VERSIONS.values()}
    for job in jobs:
        assert job["Command"]["Name"] == "glueetl"
        assert literal(job["Command"]["ScriptLocation"]).endswith(".py")


def test_jobs_carry_the_code_zip_and_the_api_arguments_and_install_nothing(resources: dict[str, Any]) -> None:
    for job in of_type(resources, "AWS::Glue::Job").values():
        args = job["Properties"]["DefaultArguments"]
        assert literal(args["--extra-py-files"]).endswith(".zip")  # Spark puts only .zip/.egg on executors
        assert "--additional-python-modules" not in args  # the jobs need only pyspark and boto3
        assert args["--job-bookmark-option"] == "job-bookmark-disable"
        assert "--sluice_api_url" in args and "--sluice_token_secret_arn" in args
        assert args["--sluice_segment_bucket"] == {"Ref": c.LOGICAL_SEGMENT_BUCKET}


def test_the_stack_uploads_exactly_the_zip_the_spark_test_runs(app_and_stack: Any, resources: Any) -> None:
    app, _ = app_and_stack
    keys = {literal(j["Properties"]["DefaultArguments"]["--extra-py-files"]).rsplit("/", 1)[-1]
            for j in of_type(resources, "AWS::Glue::Job").values()}  # fmt: skip
    assert len(keys) == 1
    staged = Path(app.outdir) / f"asset.{keys.pop()}"
    assert staged.read_bytes() == build_glue_artifact().read_bytes()


def test_zip_holds_the_jobs_and_what_they_import_and_nothing_else() -> None:
    with zipfile.ZipFile(build_glue_artifact()) as archive:
        names = set(archive.namelist())
    assert {"glue_jobs/common.py", "glue_jobs/pull_consumer.py", "glue_jobs/segment_reader.py"} <= names
    assert {"sluice/__init__.py", "sluice/client.py"} <= names  # the SDK the executors call the API with
    assert not any(n.startswith(("sluice/local/", "sluice/engine/", "lambdas/")) for n in names)


def _copy_shipped_tree(dest: Path) -> Path:
    for package in ("glue_jobs", "sluice"):
        shutil.copytree(REPO_ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_zip_is_cached_deterministic_and_rebuilt_when_any_shipped_file_changes(tmp_path: Path) -> None:
    root = _copy_shipped_tree(tmp_path / "repo")
    first = build_glue_artifact(root, tmp_path / "cache")
    assert build_glue_artifact(root, tmp_path / "cache") == first  # cached
    assert build_glue_artifact(root, tmp_path / "other").read_bytes() == first.read_bytes()  # same bytes
    (root / "sluice" / "engine" / "keys.py").write_text("# not shipped\n")
    assert build_glue_artifact(root, tmp_path / "cache") == first  # not shipped: same artifact
    for shipped in ("sluice/client.py", "glue_jobs/segment_reader.py"):
        before = build_glue_artifact(root, tmp_path / "cache")
        with (root / shipped).open("a") as fh:
            fh.write("# changed\n")
        after = build_glue_artifact(root, tmp_path / "cache")
        assert after != before and after.name == before.name == "sluice_glue.zip"
        with zipfile.ZipFile(after) as archive:
            assert archive.read(shipped).endswith(b"# changed\n")
