"""Settings in one place: Lambda and engine code read configuration only through `sluice.settings`
(the local runtime and the CLI set variables for the processes they start, so they may read them)."""

from __future__ import annotations

import re
from pathlib import Path

from sluice import constants as c
from sluice.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
MAY_READ_ENVIRONMENT = {"sluice/settings.py", "sluice/cli.py", "sluice/demo.py"}


def test_only_settings_reads_the_environment_in_lambda_and_engine_code():
    readers = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in [*ROOT.glob("sluice/**/*.py"), *ROOT.glob("lambdas/**/*.py")]
        if str(path.relative_to(ROOT)) not in MAY_READ_ENVIRONMENT and "sluice/local/" not in str(path)
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"os\.environ|getenv\(", line)
    ]
    assert not readers


def test_function_and_coordinator_settings_come_from_the_environment():
    env = {
        c.ENV_CONTROL_TABLE: "control",
        c.ENV_SHARD_TABLES: "s0,s1",
        c.ENV_SEGMENT_BUCKET: "bucket",
        c.ENV_SHARD_MAP_PREFIX: "/sluice/maps/",
        c.ENV_ALLOW_LOCAL_WEBHOOKS: "1",
        c.ENV_OPEN_STREAM_PREFIX: "public/",
        c.ENV_LAMBDA_ENDPOINT_URL: "http://127.0.0.1:9",
        c.ENV_COORDINATOR_LOOP_SECONDS: "58",
        c.ENV_SHARD_FUNCTION: "sluice-dev-shard",
        c.ENV_CONSUMER_FUNCTION: "",  # empty is unset, as the stack writes it
    }
    s = Settings.from_env(env)
    assert (s.allow_local_webhooks, s.open_stream_prefix, s.lambda_endpoint_url) == (
        True,
        "public/",
        "http://127.0.0.1:9",
    )
    assert (s.coordinator.loop_seconds, s.coordinator.shard_function) == (58.0, "sluice-dev-shard")
    assert s.coordinator.consumer_function is None and s.coordinator.period_seconds is None
    off = Settings.from_env({**env, c.ENV_ALLOW_LOCAL_WEBHOOKS: "0", c.ENV_OPEN_STREAM_PREFIX: ""})
    assert (off.allow_local_webhooks, off.open_stream_prefix) == (False, "")
