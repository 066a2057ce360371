"""Glue jobs: both scripts in Glue 5.0 and 6.0, one zip of the code they import in --extra-py-files (the
very file tests/spark/test_glue_artifact.py runs with `spark-submit --py-files`), nothing from PyPI."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from glue_jobs.arguments import ALIASES
from glue_jobs.pull_consumer import PullArgs
from glue_jobs.segment_reader import ReaderArgs
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


def test_each_argument_the_stack_sets_for_the_jobs_fills_a_field_of_their_arguments(
    resources: dict[str, Any],
) -> None:
    fields = {f.name for kind in (PullArgs, ReaderArgs) for f in dataclasses.fields(kind)}
    for job in of_type(resources, "AWS::Glue::Job").values():
        ours = [a[2:] for a in job["Properties"]["DefaultArguments"] if a.startswith("--sluice_")]
        assert ours and all(ALIASES.get(a) in fields for a in ours), ours


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
    assert {"sluice/segmentformat.py", "sluice/offsets.py"} <= names  # the segment format, shared
    assert not any(n.startswith(("sluice/local/", "sluice/engine/", "lambdas/")) for n in names)
    assert "sluice/segments.py" not in names  # the engine's side (boto3 adapters, pydantic models)


CLEAN_IMPORT = """
import importlib.util, json, sys
sys.path.insert(0, sys.argv[1])
thirds = ("boto3", "botocore", "pydantic", "aws_lambda_powertools")
absent = [m for m in thirds if importlib.util.find_spec(m)]
import glue_jobs.common, glue_jobs.pull_consumer, glue_jobs.segment_reader
from sluice.segmentformat import Record, decode_segment, encode_segment
one = Record(shard=0, seq=7, id="m", timestamp_ms=1, content_type="text", body=b"hi")
assert [Record.from_json(line) for line in decode_segment(encode_segment([one]))] == [one]
ours = {n: m.__file__ for n, m in sys.modules.items() if n.split(".")[0] in ("glue_jobs", "sluice")}
known = {*sys.stdlib_module_names, "__main__", "glue_jobs", "sluice"}
others = sorted({n.split(".")[0] for n in sys.modules} - known)
print(json.dumps({"importable": absent, "ours": ours, "others": others}))
"""


def test_the_zip_alone_imports_the_jobs_and_the_segment_format_with_no_third_party_package(
    tmp_path: Path,
) -> None:
    """`python -I -S`: no site-packages at all (so no boto3 or pydantic), no PYTHONPATH, and a working
    directory outside the repository: every module of ours must come from the zip."""
    artifact = build_glue_artifact()
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", CLEAN_IMPORT, str(artifact)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    assert seen["importable"] == [] and seen["others"] == []
    assert "sluice.segmentformat" in seen["ours"] and "sluice.segments" not in seen["ours"]
    assert all(path.startswith(str(artifact)) for path in seen["ours"].values()), seen["ours"]


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
