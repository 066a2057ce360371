# ruff: noqa: E501  (table prose: long lines)
"""Cost at rest: what one region of the stack costs per month when nothing is sent (docs/performance.md
"Cost at rest"), from the synthesized template (what is deployed) and a measured idle coordinator run.
`python -m bench.rest` (run by `make bench`) measures and writes that section of the page.

The coordinator's run is the real handler, in-process on moto, on a schedule event with `queues` idle
queues: its handler CPU (process time outside AWS calls, as bench/measure.py does), its AWS calls (each
priced as `prices.DDB_ROUND_TRIP_MS` of billed duration, as every other Lambda figure here) and what it
writes to CloudWatch Logs. Prices and their sources are in bench/prices.py.
"""

from __future__ import annotations

import io
import logging
import os
import time
from contextlib import redirect_stdout
from typing import Any

from bench import prices
from bench.measure import AwsTimer, setup_aws_env
from sluice import constants as c
from sluice.engine.tierpolicy import MAX_HOT_DAYS

RUNS = 5


def count_resources(template: dict[str, Any]) -> dict[str, Any]:
    """What the template deploys that costs money by the month."""
    resources = template["Resources"].values()

    def of(kind: str) -> list[dict[str, Any]]:
        return [r.get("Properties", {}) for r in resources if r["Type"] == kind]

    functions = of("AWS::Lambda::Function")
    snap = [f for f in functions if (f.get("SnapStart") or {}).get("ApplyOn") == "PublishedVersions"]
    tables = of("AWS::DynamoDB::Table") + of("AWS::DynamoDB::GlobalTable")
    return {
        "alarms": len(of("AWS::CloudWatch::Alarm")),
        "dashboards": len(of("AWS::CloudWatch::Dashboard")),
        "secrets": len(of("AWS::SecretsManager::Secret")),
        "kms_keys": len(of("AWS::KMS::Key")),
        "snapstart_gb": sum(f.get("MemorySize", 128) for f in snap) / 1024,
        "snapstart_functions": len(snap),
        "tables": len(tables),
        "pitr_tables": sum(
            1
            for t in tables
            if (t.get("PointInTimeRecoverySpecification") or {}).get("PointInTimeRecoveryEnabled")
        ),
        "provisioned_tables": sum(1 for t in tables if t.get("BillingMode") == "PROVISIONED"),
        "schedules": sum(1 for r in of("AWS::Events::Rule") if "ScheduleExpression" in r),
        "coordinator_mb": next(
            f.get("MemorySize", 128)
            for f in functions
            if f["Handler"] == c.FUNCTION_HANDLERS[c.FN_COORDINATOR]
        ),
    }


def measure_idle_coordinator(queue_counts: tuple[int, ...] = (1, 5)) -> dict[int, dict[str, float]]:
    """Per scheduled run of the coordinator with n idle queues, for each n of `queue_counts`: handler
    CPU ms, AWS calls, DynamoDB units, passes, and bytes written to the log (Powertools log lines and
    EMF metric lines; Lambda's own START, END and REPORT lines are added by the caller)."""
    setup_aws_env()
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "false"
    os.environ["POWERTOOLS_LOG_LEVEL"] = "INFO"
    os.environ[c.ENV_POWERTOOLS_METRICS_NAMESPACE] = c.METRICS_NAMESPACE
    import boto3
    from moto import mock_aws

    from bench.accounting import Accountant
    from sluice.adapters import aws
    from sluice.local import moto_patches
    from sluice.local.provision import provision
    from sluice.local.workers import LocalContext
    from sluice.service import Sluice
    from sluice.settings import get_settings

    event = {"kind": "coordinator.run"}
    out: dict[int, dict[str, float]] = {}
    for count in queue_counts:
        with mock_aws():
            moto_patches.apply()
            settings = provision(None, f"rest{count}")
            os.environ.update(settings.to_env())
            get_settings.cache_clear()
            engine = Sluice.from_settings(settings)
            for i in range(count):
                engine.queues.create(f"idle-{i}")
            from lambdas.common import runtime
            from lambdas.coordinator import handler

            runtime.service.cache_clear()
            handler.coordinator.cache_clear()
            handler.lambda_handler(event, LocalContext(c.FN_COORDINATOR, 70))  # cold, and the prune
            accountant = Accountant(boto3.client("dynamodb", region_name="us-east-1")).start()
            handler.lambda_handler(event, LocalContext(c.FN_COORDINATOR, 70))
            units = accountant.reset()
            accountant.stop()
            timer = AwsTimer()
            stop = aws.instrument(timer.attach)
            captured = io.StringIO()
            log_handler = logging.StreamHandler(captured)
            logging.getLogger(c.SERVICE_NAME).addHandler(log_handler)
            cpu = calls = passes = 0.0
            try:
                for _ in range(RUNS):
                    inside0, calls0, cpu0 = timer.inside, timer.calls, time.process_time()
                    with redirect_stdout(captured):
                        result = handler.lambda_handler(event, LocalContext(c.FN_COORDINATOR, 70))
                    cpu += time.process_time() - cpu0 - (timer.inside - inside0)
                    calls += timer.calls - calls0
                    passes += result["passes"]
            finally:
                stop()
                logging.getLogger(c.SERVICE_NAME).removeHandler(log_handler)
        out[count] = {
            "cpu_ms": 1000 * cpu / RUNS,
            "calls": calls / RUNS,
            "passes": passes / RUNS,
            "log_bytes": len(captured.getvalue().encode()) / RUNS,
            "wru": units.wcu,
            "rru": units.rcu,
        }
    return out


def per_queue(runs: dict[int, dict[str, float]]) -> dict[str, float]:
    """What each further idle queue adds to a run (the difference between the two counts measured)."""
    low, high = sorted(runs)
    return {k: max(0.0, (runs[high][k] - runs[low][k]) / (high - low)) for k in runs[low]}


def cost_at_rest(
    resources: dict[str, Any], idle: dict[str, float], per_queue: dict[str, float]
) -> list[dict[str, Any]]:
    """The rows of the "Cost at rest" table: per region per month at zero traffic. `idle`: the measured
    run with one queue; `per_queue`: what each further queue adds to a run (calls, CPU, log bytes)."""
    runs = prices.COORDINATOR_RUNS_PER_MONTH
    gb = resources["coordinator_mb"] / 1024
    billed_ms = prices.billed_ms(idle["cpu_ms"], idle["calls"])
    lambda_month = runs * (prices.LAMBDA_REQUEST_PRICE + billed_ms / 1000 * gb * prices.LAMBDA_GBS_PRICE)
    queue_ms = prices.billed_ms(per_queue["cpu_ms"], per_queue["calls"], minimum=0)
    log_gb = runs * (idle["log_bytes"] + prices.LAMBDA_LOG_LINES_BYTES) / 1e9
    rows = [
        {
            "item": "coordinator Lambda (one short pass a minute)",
            "quantity": f"{runs:,.0f} runs x {billed_ms:.0f} ms x {gb:g} GB",
            "month": lambda_month,
            "source": "measured idle run (bench/rest.py); Lambda arm64 price",
        },
        {
            "item": "coordinator logs (CloudWatch Logs ingestion + 1 month stored)",
            "quantity": f"{runs:,.0f} x {idle['log_bytes'] + prices.LAMBDA_LOG_LINES_BYTES:,.0f} B",
            "month": log_gb * (prices.CW_LOGS_INGEST_GB + prices.CW_LOGS_STORE_GB_MONTH),
            "source": "measured log lines + Lambda's START/END/REPORT",
        },
        {
            "item": "coordinator X-Ray traces (active tracing)",
            "quantity": f"{runs:,.0f} traces",
            "month": runs * prices.XRAY_TRACE_PRICE,
            "source": "X-Ray, $5.00/M traces recorded (the first 100,000 a month are free per account)",
        },
        {
            "item": "EventBridge schedule (rate 1 minute)",
            "quantity": f"{resources['schedules']} rule, {runs:,.0f} events",
            "month": 0.0,
            "source": "EventBridge: scheduled rule events are AWS events, not billed (custom events $1/M)",
        },
        {
            "item": "SnapStart cache (broker, consumer: one live version each)",
            "quantity": f"{resources['snapstart_gb']:g} GB x {prices.HOURS_PER_MONTH * 3600:,.0f} s",
            "month": resources["snapstart_gb"]
            * prices.HOURS_PER_MONTH
            * 3600
            * prices.SNAPSTART_CACHE_GBS_PRICE,
            "source": "Lambda SnapStart (Python): $0.0000015046/GB-s cached, per published version kept",
        },
        {
            "item": "CloudWatch alarms",
            "quantity": f"{resources['alarms']} standard alarms",
            "month": resources["alarms"] * prices.CW_ALARM_MONTH,
            "source": "CloudWatch, $0.10 per standard alarm metric",
        },
        {
            "item": "CloudWatch dashboard",
            "quantity": f"{resources['dashboards']} dashboard",
            "month": resources["dashboards"] * prices.CW_DASHBOARD_MONTH,
            "source": "CloudWatch, $3.00 per dashboard (the first 3 of an account are free)",
        },
        {
            "item": "custom metrics (EMF) at rest",
            "quantity": "0: an idle queue emits none (sluice/engine/coordinator, handler)",
            "month": 0.0,
            "source": "CloudWatch, $0.30 per metric, prorated by the hour it is emitted in",
        },
        {
            "item": "Secrets Manager (lease key, Glue token)",
            "quantity": f"{resources['secrets']} secrets",
            "month": resources["secrets"] * prices.SECRET_MONTH,
            "source": "Secrets Manager, $0.40 per secret",
        },
        {
            "item": "KMS keys",
            "quantity": f"{resources['kms_keys']} customer managed (tables, bucket, secrets use AWS managed keys)",
            "month": resources["kms_keys"] * prices.KMS_KEY_MONTH,
            "source": "KMS, $1.00 per customer managed key; AWS managed keys are free",
        },
        {
            "item": "SSM shard maps",
            "quantity": "Standard parameters only (a map over 4 KB is split, never Advanced)",
            "month": 0.0,
            "source": "Parameter Store: Standard parameters and standard throughput are free",
        },
        {
            "item": "provisioned capacity minimums",
            "quantity": f"{resources['provisioned_tables']} provisioned tables (on demand by default)",
            "month": resources["provisioned_tables"]
            * prices.provisioned_floor_per_month(prices.MIN_PROVISIONED_UNITS, prices.MIN_PROVISIONED_UNITS),
            "source": "DynamoDB provisioned: $0.00065/WCU-h, $0.00013/RCU-h at the autoscaling minimum",
        },
    ]
    total = sum(r["month"] for r in rows)
    rows.append({"item": "**fixed total per region**", "quantity": "", "month": total, "source": ""})
    per_queue_rows = [
        {
            "item": "per idle queue: the coordinator's pass over it",
            "quantity": f"+{per_queue['calls']:.1f} calls, +{queue_ms:.1f} ms a run",
            "month": runs
            * (
                queue_ms / 1000 * gb * prices.LAMBDA_GBS_PRICE
                + per_queue["rru"] * prices.RRU_PRICE
                + per_queue["wru"] * prices.WRU_PRICE
            ),
            "source": "measured: HEAD and state reads, saved state write",
        },
        {
            "item": "per GB stored: DynamoDB (+ point-in-time recovery)",
            "quantity": f"{resources['pitr_tables']} of {resources['tables']} tables with PITR",
            "month": prices.DDB_STORAGE_GB_MONTH + prices.DDB_PITR_GB_MONTH,
            "source": "DynamoDB, $0.25/GB-month + PITR $0.20/GB-month",
        },
        {
            "item": "per GB stored: S3 segments (bottomless queues)",
            "quantity": "S3 Standard",
            "month": prices.S3_STANDARD_GB_MONTH,
            "source": "S3 Standard, $0.023/GB-month",
        },
        {
            "item": "per GB stored: payload-tier objects (sends the tier moved to S3)",
            "quantity": f"S3 Standard, each kept its retention + 1 day (bottomless: {MAX_HOT_DAYS + 1} days)",
            "month": prices.S3_STANDARD_GB_MONTH,
            "source": "S3 Standard, $0.023/GB-month (sluice/engine/tierpolicy.py)",
        },
    ]
    return rows + per_queue_rows


def rows() -> list[dict[str, Any]]:
    """The cost-at-rest rows: the deployed template's resources and a measured idle coordinator."""
    from sluice.local.iamcheck import template_for_stage

    runs = measure_idle_coordinator()
    deployed = count_resources(template_for_stage("dev"))
    return cost_at_rest(deployed, runs[min(runs)], per_queue(runs))


def main() -> None:
    from pathlib import Path

    from bench.report import REST_END, REST_START, render_rest, replace_section

    section = render_rest(rows())
    replace_section(
        Path(__file__).resolve().parent.parent / "docs" / "performance.md", section, REST_START, REST_END
    )
    print(section)


if __name__ == "__main__":
    main()
