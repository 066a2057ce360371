"""The code the Glue jobs import, as one zip for `--extra-py-files` (Spark's `--py-files`).

Why a zip: Glue hands `--extra-py-files` to Spark, and Spark puts only `.zip`, `.egg` and `.jar` files of
`spark.submit.pyFiles` on the executors' Python path: a `.whl` reaches the driver, never the executors
("No module named 'glue_jobs'"). The AWS Glue docs ask the same: a library of more than one file goes in a
`.zip` with the package at its root. What goes in: every module of `glue_jobs` and each module of this
repository that they import (found by `modulefinder`, so a new import ships without a list to keep).
Nothing else: on Glue the jobs need only pyspark and boto3, which Glue provides.

The zip is deterministic (sorted entries, fixed timestamps) and cached as
`.cache/glue/<hash of every shipped file>/sluice_glue.zip`: unchanged code is never rebuilt, and the
CDK asset (so its S3 key) changes exactly when a shipped file does. No CDK imports here: the Spark tests
build the very same file and run it with `spark-submit --py-files`.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import zipfile
from modulefinder import ModuleFinder
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE = REPO_ROOT / ".cache" / "glue"
ARTIFACT_NAME = "sluice_glue.zip"
JOBS_PACKAGE = "glue_jobs"
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry: same bytes on every build


def shipped_files(root: Path = REPO_ROOT) -> list[Path]:
    """`glue_jobs/*.py` and the repository modules they import, transitively (relative paths, sorted).
    Only `root` is searched, so third-party and standard-library imports are left to the runtime."""
    finder = ModuleFinder(path=[str(root)])
    entries = sorted((root / JOBS_PACKAGE).glob("*.py"))
    for script in entries:
        finder.run_script(str(script))
    # modulefinder.Module sets `__file__` (None for built-ins), which typeshed does not declare
    files = (getattr(m, "__file__", None) for m in finder.modules.values())
    found = {Path(f).resolve() for f in files if f}
    found.update(p.resolve() for p in entries)
    inside = (p for p in found if p.is_relative_to(root.resolve()) and p.suffix == ".py")
    return sorted(p.relative_to(root.resolve()) for p in inside)


def content_hash(root: Path, files: list[Path]) -> str:
    digest = hashlib.sha256()
    for rel in files:
        digest.update(rel.as_posix().encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build_glue_artifact(root: Path = REPO_ROOT, cache: Path = CACHE) -> Path:
    """The zip for this source tree: built once per content hash, written atomically (two synths at
    once each write a complete file, and both files are identical)."""
    files = shipped_files(root)
    target = cache / content_hash(root, files) / ARTIFACT_NAME
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for rel in files:
            info = zipfile.ZipInfo(rel.as_posix(), date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, (root / rel).read_bytes())
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as out:
        out.write(buffer.getvalue())
    os.replace(tmp, target)
    return target
