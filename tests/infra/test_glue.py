"""Glue jobs: both scripts in Glue 5.0 and 6.0, the sluice wheel in --extra-py-files."""

from __future__ import annotations

import zipfile
from typing import Any

import pytest

from sluice import constants as c
from stacks.glue import GLUE_VERSIONS, JOB_SCRIPTS, build_wheel
from tests.infra.helpers import literal, of_type

pytestmark = pytest.mark.infra


def test_each_script_has_a_glue5_and_glue6_job(resources: dict[str, Any]) -> None:
    jobs = [j["Properties"] for j in of_type(resources, "AWS::Glue::Job").values()]
    seen = {(j["Name"].rsplit("-", 1)[0].split("-", 2)[-1], j["GlueVersion"]) for j in jobs}
    assert seen == {(name, v) for name in JOB_SCRIPTS for v in GLUE_VERSIONS.values()}
    for job in jobs:
        assert job["Command"]["Name"] == "glueetl"
        assert literal(job["Command"]["ScriptLocation"]).endswith(".py")


def test_jobs_carry_the_wheel_and_api_arguments(resources: dict[str, Any]) -> None:
    for job in of_type(resources, "AWS::Glue::Job").values():
        args = job["Properties"]["DefaultArguments"]
        assert literal(args["--extra-py-files"]).endswith(".whl")
        assert args["--additional-python-modules"].startswith("pydantic==")
        assert args["--job-bookmark-option"] == "job-bookmark-disable"
        assert "--sluice_api_url" in args and "--sluice_token_secret_arn" in args
        assert args["--sluice_segment_bucket"] == {"Ref": c.LOGICAL_SEGMENT_BUCKET}


def test_wheel_is_cached_and_holds_the_package() -> None:
    first = build_wheel()
    assert build_wheel() == first
    with zipfile.ZipFile(first) as whl:
        names = whl.namelist()
    assert "sluice/constants.py" in names and "sluice/settings.py" in names
