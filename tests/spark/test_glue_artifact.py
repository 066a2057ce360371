"""`spark-submit --py-files <the zip the stack uploads>` runs both Glue jobs, as Glue runs them: the script
alone in a directory, and an interpreter where neither `glue_jobs` nor `sluice` is installed and the
packages Glue lacks cannot be imported. The executors can only import the jobs' code from the zip (a
`.whl` there reaches the driver but not the executors: "No module named 'glue_jobs'")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path

import pytest

from stacks.glue_artifact import REPO_ROOT, build_glue_artifact
from tests.spark.conftest import SPARK_ENV
from tests.spark.segdata import put_segment

pytestmark = pytest.mark.slow

# Installed here for the tests and the local runtime, absent on Glue and never imported by the jobs.
NOT_ON_GLUE = ("moto", "tqdm", "pydantic", "aws_lambda_powertools")
BLOCKER = f"""import importlib.abc, sys

class _NotOnGlue(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {NOT_ON_GLUE!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not on Glue)", name=name)
        return None

sys.meta_path.insert(0, _NotOnGlue())
"""

PROBE = """import importlib, json
found = {}
for name in %r:
    try:
        importlib.import_module(name)
        found[name] = True
    except ImportError:
        found[name] = False
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def glue_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A venv that sees this venv's third-party packages (pyspark, boto3) by a plain path entry, so the
    editable install of this project (a .pth in that directory) is never processed."""
    venv = tmp_path_factory.mktemp("glue-python")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    ).strip()
    Path(site, "_not_on_glue.py").write_text(BLOCKER)
    Path(site, "glue_runtime.pth").write_text(f"{sysconfig.get_paths()['purelib']}\nimport _not_on_glue\n")
    modules = ("pyspark", "boto3", "glue_jobs", "sluice", *NOT_ON_GLUE)
    seen = json.loads(subprocess.check_output([python, "-c", PROBE % (modules,)], cwd=venv, text=True))
    assert seen == {m: m in ("pyspark", "boto3") for m in modules}
    return python


def spark_submit(python: str, workdir: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run one job script the way Glue does: a copy of the script alone, the zip in --py-files."""
    import pyspark

    scripts = workdir / "scripts"
    scripts.mkdir(exist_ok=True)
    job = shutil.copy(REPO_ROOT / script, scripts)
    home = Path(pyspark.__file__).parent
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(SPARK_ENV, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python, SPARK_HOME=str(home))
    cmd = [
        str(home / "bin" / "spark-submit"), "--master", "local[2]", "--driver-memory", "1g",
        "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=1",
        "--py-files", str(build_glue_artifact()), str(job), *args,
    ]  # fmt: skip
    # cwd: Spark's Python workers start with `-m`, which puts the working directory on their path
    return subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)


def test_spark_submit_runs_the_pull_consumer_from_the_zip(spark, local, glue_python, tmp_path):
    queue = local.new_queue()
    sent = local.send(queue, 600)
    out, summary = tmp_path / "out", tmp_path / "summary.json"
    # the arguments as the stack's job passes them (--sluice_*), plus Glue's own, which the job ignores
    done = spark_submit(
        glue_python, tmp_path, "glue_jobs/pull_consumer.py",
        "--JOB_NAME", "sluice-test-pull-consumer", "--job-bookmark-option", "job-bookmark-disable",
        "--sluice_api_url", local.url, "--token", local.token, "--queue", queue,
        "--sluice_output_path", str(out), "--parallelism", "2", "--round-messages", "400",
        "--summary-path", str(summary),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(summary.read_text())
    assert report["messages"] == 600 and report["backlog"] == 0 and report["rounds"] == 2
    assert {r.id for r in spark.read.parquet(str(out)).select("id").collect()} == set(sent)
    assert local.client.pull(queue, batch_size=100).messages == []  # all acked


def test_spark_submit_runs_the_segment_reader_from_the_zip(spark, local, glue_python, tmp_path):
    import boto3

    endpoint, bucket = local.runtime.settings.aws_endpoint_url, local.runtime.settings.segment_bucket
    s3 = boto3.client("s3", endpoint_url=endpoint)
    queue = f"submit-{uuid.uuid4().hex[:8]}"
    expected = {r["id"] for shard in (0, 1) for r in put_segment(s3, bucket, queue, shard, 0, 149)}
    out = tmp_path / "replay"
    done = spark_submit(
        glue_python, tmp_path, "glue_jobs/segment_reader.py",
        "--JOB_NAME", "sluice-test-segment-reader", "--sluice_segment_bucket", bucket, "--queue", queue,
        "--endpoint-url", endpoint, "--sluice_output_path", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    rows = spark.read.parquet(str(out)).select("id", "shard").collect()
    assert len(rows) == len(expected) == 300 and {r.id for r in rows} == expected
