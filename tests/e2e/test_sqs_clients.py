"""Real SQS clients, unchanged, against `sluice local`: the newest boto3 (AWS JSON 1.0) and botocore
1.31.80 (the query protocol) through every action (sqs_scenario.py), the AWS CLI, a Celery worker on
kombu's SQS transport, the AWS SDK for JavaScript v3 with `sqs-consumer` (sqs_js_calls.cjs), FIFO order
and deduplication, and SigV4's refusals.

The foreign clients run in venvs of their own that uv builds at test time (`uv run --no-project --with
...`, from uv's cache after the first time): their pins differ from the project's lock, and pycurl (which
kombu's SQS transport needs) installs from its manylinux wheel with its own libcurl, no native build."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import botocore.auth
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.e2e.conftest import LocalServer

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent
SCENARIO = HERE / "sqs_scenario.py"
QUERY_BOTOCORE = ("botocore==1.31.80", "boto3==1.28.80")  # the last botocore speaking SQS's query protocol
CELERY = ("celery[sqs]==5.7.0", "kombu==5.7.0")


def _uv() -> list[str]:
    """uv as the Makefile finds it: on PATH, else the module of the Python that installed it."""
    found = shutil.which("uv")
    if found:
        return [found]
    for python in (sys.executable, shutil.which("python3")):
        if python and subprocess.run([python, "-m", "uv", "--version"], capture_output=True).returncode == 0:
            return [python, "-m", "uv"]
    pytest.fail("uv is not installed: run `make install` (it installs uv first)")


def uv_run(
    packages: tuple[str, ...],
    *args: str,
    env: dict[str, str] | None = None,
    timeout: int = 300,
    background: bool = False,
    stdin: bool = False,
) -> Any:
    """`args` in a throwaway venv (Python 3.11) holding only `packages`."""
    with_args = [a for p in packages for a in ("--with", p)]
    command = [*_uv(), "run", "--no-project", "--python", "3.11", *with_args, *args]
    full_env = {**os.environ, **(env or {})}
    full_env.pop("VIRTUAL_ENV", None)
    if background:
        return subprocess.Popen(
            command,
            env=full_env,
            stdin=subprocess.PIPE if stdin else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if stdin else subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    done = subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def creds(local_server: LocalServer) -> dict[str, str]:
    admin = local_server.client()
    token = admin.create_token("*", ["admin"])
    return admin.issue_access_key(token["token_id"])


def client(server: LocalServer, creds: dict[str, str], secret: str | None = None) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id=creds["access_key_id"],
        aws_secret_access_key=secret or creds["secret_access_key"],
        config=Config(retries={"max_attempts": 1}),
    )


EVERY_ACTION = sorted(boto3.client("sqs", region_name="us-east-1").meta.service_model.operation_names)


def _scenario(
    server: LocalServer, creds: dict[str, str], packages: tuple[str, ...], prefix: str
) -> tuple[list[str], str]:
    out = uv_run(
        packages,
        "python",
        str(SCENARIO),
        server.url,
        creds["access_key_id"],
        creds["secret_access_key"],
        prefix,
    )
    lines = dict(
        line.split(" ", 1) for line in out.splitlines() if line.startswith(("actions ", "protocol "))
    )
    return json.loads(lines["actions"]), lines["protocol"]


def test_newest_boto3_json_protocol_every_action(local_server, creds):
    actions, protocol = _scenario(local_server, creds, ("boto3",), "j")
    assert protocol.startswith("json ")
    assert actions == EVERY_ACTION


def test_botocore_1_31_80_query_protocol_every_action(local_server, creds):
    actions, protocol = _scenario(local_server, creds, QUERY_BOTOCORE, "qp")
    assert protocol == "query 1.31.80"
    assert actions == EVERY_ACTION


# The AWS CLI's own entry point, run once for a whole sequence of commands (each `aws` process would
# pay its start-up again): every line of stdin is one `aws` command line, answered by one JSON line.
CLI_DRIVER = """
import io, json, shlex, sys
from contextlib import redirect_stdout
from awscli.clidriver import create_clidriver
for line in sys.stdin:
    out = io.StringIO()
    with redirect_stdout(out):
        code = create_clidriver().main(shlex.split(line))
    print(json.dumps({"code": code, "out": out.getvalue()}), flush=True)
"""


def test_aws_cli(local_server, creds, tmp_path):
    env = {
        "AWS_ACCESS_KEY_ID": creds["access_key_id"],
        "AWS_SECRET_ACCESS_KEY": creds["secret_access_key"],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
    }
    (tmp_path / "cli.py").write_text(CLI_DRIVER)
    cli = uv_run(("awscli",), "python", str(tmp_path / "cli.py"), env=env, background=True, stdin=True)

    def aws(*args: str) -> Any:
        line = " ".join(["--endpoint-url", local_server.url, "--output", "json", "sqs", *args])
        cli.stdin.write(line + "\n")
        cli.stdin.flush()
        answer = json.loads(cli.stdout.readline())
        assert answer["code"] == 0, (args, answer)
        return json.loads(answer["out"]) if answer["out"].strip() else None

    try:
        url = aws("create-queue", "--queue-name", "cli-q", "--attributes", "VisibilityTimeout=20")["QueueUrl"]
        assert aws("get-queue-url", "--queue-name", "cli-q")["QueueUrl"] == url
        aws("send-message", "--queue-url", url, "--message-body", "'from the cli'")
        got = aws(
            "receive-message", "--queue-url", url, "--wait-time-seconds", "2", "--attribute-names", "All"
        )
        assert [m["Body"] for m in got["Messages"]] == ["from the cli"]
        aws("delete-message", "--queue-url", url, "--receipt-handle", got["Messages"][0]["ReceiptHandle"])
        attributes = aws("get-queue-attributes", "--queue-url", url, "--attribute-names", "All")["Attributes"]
        assert attributes["VisibilityTimeout"] == "20" and attributes["ApproximateNumberOfMessages"] == "0"
        assert url in aws("list-queues", "--queue-name-prefix", "cli-")["QueueUrls"]
        aws("delete-queue", "--queue-url", url)
    finally:
        cli.stdin.close()
        cli.wait(timeout=60)


# The AWS SDK for JavaScript v3 and BBC's sqs-consumer on it, pinned in conformance/package.json
# (`make test` installs them, as it does the npm Cloudflare SDKs).
NODE_MODULES = HERE.parents[1] / "conformance" / "node_modules"
JS_CALLS = HERE / "sqs_js_calls.cjs"
JS_ACTIONS = {
    "ChangeMessageVisibility", "ChangeMessageVisibilityBatch", "CreateQueue", "DeleteMessage",
    "DeleteMessageBatch", "DeleteQueue", "GetQueueAttributes", "GetQueueUrl", "ListDeadLetterSourceQueues",
    "ListQueueTags", "ListQueues", "PurgeQueue", "ReceiveMessage", "SendMessage", "SendMessageBatch",
    "SetQueueAttributes", "TagQueue", "UntagQueue",
}  # fmt: skip


def test_the_javascript_sdk_v3_and_sqs_consumer(local_server, creds):
    if shutil.which("node") is None or not (NODE_MODULES / "sqs-consumer" / "package.json").is_file():
        pytest.fail("npm sqs-consumer is not installed: run `make test` (or `cd conformance && npm ci`)")
    done = subprocess.run(
        ["node", str(JS_CALLS), str(NODE_MODULES), local_server.url, creds["access_key_id"],
         creds["secret_access_key"], "js"],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)
    pinned = json.loads((HERE.parents[1] / "conformance" / "package.json").read_text())["dependencies"]
    assert (report["version"], report["consumer_version"]) == (
        pinned["@aws-sdk/client-sqs"],
        pinned["sqs-consumer"],
    )
    assert set(report["calls"]) == JS_ACTIONS
    assert report["processed"] == 200 and report["retried"] == ["job-7:2"], report


# --- FIFO ---------------------------------------------------------------------------------------------------


def test_fifo_order_per_group_group_held_in_flight_and_deduplication(local_server, creds):
    sqs = client(local_server, creds)
    q = sqs.create_queue(
        QueueName="jobs.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    )["QueueUrl"]
    sent = []
    for i in range(6):
        group = "ab"[i % 2]
        r = sqs.send_message(
            QueueUrl=q, MessageBody=f"{group}{i}", MessageGroupId=group, MessageDeduplicationId=f"d{i}"
        )
        sent.append(int(r["SequenceNumber"]))
    assert sent == sorted(sent)
    # duplicates within 5 minutes: an explicit id again, and content-based (same body, no id) twice
    dup = sqs.send_message(
        QueueUrl=q, MessageBody="other body", MessageGroupId="a", MessageDeduplicationId="d0"
    )
    assert int(dup["SequenceNumber"]) == sent[0]
    sqs.send_message(QueueUrl=q, MessageBody="same", MessageGroupId="c")
    sqs.send_message(QueueUrl=q, MessageBody="same", MessageGroupId="c")
    first = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    # one message per group while it is in flight: the head of a, of b and of c
    assert sorted(m["Body"] for m in first) == ["a0", "b1", "same"]
    assert {m["Attributes"]["MessageGroupId"] for m in first} == {"a", "b", "c"}
    assert all("SequenceNumber" in m["Attributes"] for m in first)
    assert sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10).get("Messages", []) == []  # all held
    order: dict[str, list[str]] = {"a": [], "b": [], "c": []}
    batch = first
    while batch:
        for m in batch:
            order[m["Attributes"]["MessageGroupId"]].append(m["Body"])
            sqs.delete_message(QueueUrl=q, ReceiptHandle=m["ReceiptHandle"])
        batch = sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10, AttributeNames=["All"]).get(
            "Messages", []
        )
    assert order == {"a": ["a0", "a2", "a4"], "b": ["b1", "b3", "b5"], "c": ["same"]}
    with pytest.raises(ClientError) as missing_group:
        sqs.send_message(QueueUrl=q, MessageBody="x", MessageDeduplicationId="z")
    assert missing_group.value.response["Error"]["Code"] == "MissingParameter"
    sqs.delete_queue(QueueUrl=q)


# --- SigV4 and scopes: SQS's errors, nothing changed --------------------------------------------------------


def _count(sqs: Any, url: str) -> int:
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return sum(int(attrs[k]) for k in attrs if k.startswith("ApproximateNumberOfMessages"))


def test_sigv4_refusals_get_sqs_errors_and_change_nothing(local_server, creds, monkeypatch):
    good = client(local_server, creds)
    q = good.create_queue(QueueName="guarded")["QueueUrl"]
    other = good.create_queue(QueueName="someone-elses")["QueueUrl"]

    def refused(sqs: Any, code: str, status: int, **send: Any) -> None:
        with pytest.raises(ClientError) as caught:
            sqs.send_message(**{"QueueUrl": q, "MessageBody": "must not land", **send})
        error = caught.value.response
        assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (code, status), error

    refused(client(local_server, creds, secret="x" * 40), "SignatureDoesNotMatch", 403)
    with pytest.raises(ClientError) as wrong_create:
        client(local_server, creds, secret="x" * 40).create_queue(QueueName="never-made")
    assert wrong_create.value.response["Error"]["Code"] == "SignatureDoesNotMatch"

    tampered = client(local_server, creds)

    def tamper(request: Any, **_: Any) -> None:
        request.body = request.body.replace(b"must not land", b"MUST NOT LAND")

    tampered.meta.events.register("before-send.sqs.SendMessage", tamper)
    refused(tampered, "SignatureDoesNotMatch", 403)

    unknown = dict(creds, access_key_id="SLUIAAAAAAAAAAAAAAAA")
    refused(client(local_server, unknown), "InvalidClientTokenId", 403)

    stale = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(minutes=20)
    with monkeypatch.context() as patch:
        patch.setattr(botocore.auth, "get_current_datetime", lambda: stale)
        refused(client(local_server, creds), "RequestExpired", 400)

    # a token bound to another queue: AccessDenied, whether or not the queue exists
    admin = local_server.client()
    scoped = admin.create_token("someone-elses", ["read", "write"])
    scoped_creds = admin.issue_access_key(scoped["token_id"])
    outsider = client(local_server, scoped_creds)
    refused(outsider, "AccessDenied", 403)
    with pytest.raises(ClientError) as absent:
        outsider.get_queue_url(QueueName="no-such-queue")
    assert absent.value.response["Error"]["Code"] == "AccessDenied"
    outsider.send_message(QueueUrl=other, MessageBody="its own queue works")
    with pytest.raises(ClientError) as not_admin:
        outsider.delete_queue(QueueUrl=other)
    assert not_admin.value.response["Error"]["Code"] == "AccessDenied"

    assert _count(good, q) == 0 and _count(good, other) == 1
    assert good.list_queues(QueueNamePrefix="never-made").get("QueueUrls", []) == []


# --- Celery -------------------------------------------------------------------------------------------------

TASKS = """
import os
from urllib.parse import quote
from celery import Celery

host = os.environ["SLUICE_HOSTPORT"]
key, secret = (quote(os.environ[v], safe="") for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"))
app = Celery("tasks", broker=f"sqs://{key}:{secret}@{host}")
app.conf.update(
    broker_transport_options={"region": "us-east-1", "is_secure": False, "wait_time_seconds": 1,
                              "visibility_timeout": 300, "polling_interval": 0.1},
    task_default_queue="celery-e2e",
    task_ignore_result=True,
    worker_prefetch_multiplier=10,
    broker_connection_retry_on_startup=True,
)
OUT = os.environ["CELERY_OUT"]


@app.task(bind=True, max_retries=3)
def record(self, i):
    if i == 7 and not os.path.exists(OUT + ".retried"):
        open(OUT + ".retried", "w").close()
        raise self.retry(countdown=1)
    with open(OUT, "a") as f:
        f.write(f"{i} {self.request.retries}\\n")


if __name__ == "__main__":
    import sys
    import time
    from concurrent.futures import ThreadPoolExecutor
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(record.delay, range(int(sys.argv[1]))))
    print(f"sent in {time.monotonic() - started:.1f} s")
"""


@pytest.mark.slow
def test_celery_worker_on_kombu_sqs_runs_1000_tasks_exactly_once_with_one_retried(
    local_server, creds, tmp_path
):
    (tmp_path / "tasks.py").write_text(TASKS)
    out = tmp_path / "done.txt"
    env = {
        "SLUICE_HOSTPORT": local_server.url.split("://", 1)[1],
        "AWS_ACCESS_KEY_ID": creds["access_key_id"],
        "AWS_SECRET_ACCESS_KEY": creds["secret_access_key"],
        "CELERY_OUT": str(out),
        "PYTHONPATH": str(tmp_path),
    }
    worker = uv_run(
        CELERY,
        "celery",
        "-A",
        "tasks",
        "worker",
        "-P",
        "threads",
        "-c",
        "8",
        "-l",
        "WARNING",
        env=env,
        background=True,
    )
    try:
        started = time.monotonic()
        sent = uv_run(CELERY, "python", str(tmp_path / "tasks.py"), "1000", env=env, timeout=600)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if out.exists() and len(out.read_text().splitlines()) >= 1000:
                break
            time.sleep(1)
        print(f"celery: {sent.strip()}; 1000 done {time.monotonic() - started:.1f} s after the first send")
        time.sleep(3)  # a duplicate would land now
    finally:
        os.killpg(worker.pid, 15)
        worker.wait(timeout=30)
    lines = [line.split() for line in out.read_text().splitlines()]
    runs = Counter(int(i) for i, _ in lines)
    assert sorted(runs) == list(range(1000)) and set(runs.values()) == {1}, runs.most_common(3)
    assert [r for i, r in lines if i == "7"] == ["1"]  # task 7 ran once more after its retry
    assert (tmp_path / "done.txt.retried").exists()
