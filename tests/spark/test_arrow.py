"""Arrow between Spark and pandas works on both Glue lines (this module runs in the main venv, Glue 5.0's
Spark 3.5 on Python 3.11, and again in `make test-spark-glue6`, Glue 6.0's Spark 4.1 on Python 3.13):
`createDataFrame(pandas)`, a pandas UDF and `toPandas()` with Arrow on and no silent fallback. The Glue 5
line pins what Glue 5.0 provides (pyproject.toml, group `spark`): with pyspark's own resolution it got
pyarrow 26 next to numpy 1.26.4, and `import pyarrow` failed."""

import sys
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
GLUE5 = sys.version_info < (3, 12)


def _glue5_pins() -> dict[str, str]:
    spark_group = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]["spark"]
    pins = {}
    for requirement in spark_group:
        spec, _, marker = requirement.partition(";")
        name, sep, pinned = spec.strip().partition("==")
        if sep and "< '3.12'" in marker and not name.startswith("pyspark"):
            pins[name] = pinned
    return pins


@pytest.mark.skipif(not GLUE5, reason="the Glue 5 line's pins (Python 3.11)")
def test_the_glue5_line_has_what_glue_5_provides() -> None:
    pins = _glue5_pins()
    assert set(pins) == {"pyarrow", "pandas", "numpy"}
    assert {name: version(name) for name in pins} == pins


def test_arrow_moves_data_between_spark_and_pandas(spark: Any) -> None:
    import pandas as pd
    import pyarrow
    from pyspark.sql.functions import pandas_udf

    assert pyarrow.__version__
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    spark.conf.set("spark.sql.execution.arrow.pyspark.fallback.enabled", "false")  # fail, never fall back
    try:
        records = pd.DataFrame({"shard": [0, 1, 2], "body": ["a", "bb", "ccc"], "ts": [1.5, 2.5, 3.5]})
        df = spark.createDataFrame(records)

        @pandas_udf("long")  # type: ignore[call-overload]
        def size(bodies: pd.Series) -> pd.Series:  # runtime hints: no `from __future__ import annotations`
            return bodies.str.len()

        out = df.withColumn("size", size("body")).orderBy("shard").toPandas()
        assert out["size"].tolist() == [1, 2, 3]
        assert out["ts"].tolist() == [1.5, 2.5, 3.5]
    finally:
        spark.conf.unset("spark.sql.execution.arrow.pyspark.enabled")
        spark.conf.unset("spark.sql.execution.arrow.pyspark.fallback.enabled")
