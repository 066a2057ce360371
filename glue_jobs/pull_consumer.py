"""Pull consumer: executors pull batches through the Sluice pull API, write Parquet, then ack.

PLACEHOLDER: this script is filled in by the Spark issue; it exists now so the stack can define the
Glue job (script asset, arguments, role) and a job run succeeds. It starts a SparkSession (which
also works on Glue without `awsglue`), parses `--key value` arguments, and exits.
"""

from __future__ import annotations

import sys


def parse_args(argv: list[str]) -> dict[str, str]:
    args: dict[str, str] = {}
    it = iter(argv)
    for token in it:
        if token.startswith("--"):
            args[token[2:]] = next(it, "")
    return args


def main(argv: list[str]) -> None:
    from pyspark.sql import SparkSession

    args = parse_args(argv)
    spark = SparkSession.builder.appName("sluice-pull_consumer").getOrCreate()
    print(f"sluice pull_consumer placeholder; arguments: {sorted(args)}; spark {spark.version}")
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
