"""Record every AWS call a handler makes as the IAM request AWS would authorize: (action, resource ARN).

Tests only: active when `SLUICE_IAM_AUDIT_FILE` names a file. A botocore `provide-client-params` hook
(one event per API call, before retries, with the caller's parameters) on every client of
`sluice.adapters.aws` maps the call to IAM requests; each distinct (function, action, resource) is
appended once per process as a JSON line. `sluice.local.iamcheck` evaluates the file against the roles
of the synthesized template. Calls are attributed to the function whose handler is running
(`attributed`, set by the local runtime's `invoke` around each event); calls made outside any handler
(test setup, provisioning) belong to no role and are not recorded.

In a multi-region `sluice local` each record also names the caller's region (`SLUICE_REGION`) next to
the call's, and the deployment's regions (`SLUICE_REGIONS`): the call is judged by the role of the
caller's region. `SLUICE_CALL_LOG_FILE` (tests) appends every call, not each
distinct one once, with its time: what a test counts (e.g. a function's cross-region calls in a window).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sluice import constants as c
from sluice.adapters import aws

# moto's default account: the checker resolves the template's AWS::AccountId to the same value.
LOCAL_ACCOUNT = "123456789012"
PARTITION = "aws"

_current: ContextVar[str | None] = ContextVar("sluice_audited_function", default=None)
_lock = threading.Lock()
_seen: set[tuple[object, ...]] = set()
_installed = False


@contextmanager
def attributed(function: str) -> Iterator[None]:
    """AWS calls made inside this block are made by `function`'s role."""
    token = _current.set(function)
    try:
        yield
    finally:
        _current.reset(token)


def install_from_env() -> bool:
    """Start recording if the audit file or the call log is configured (idempotent); True when recording."""
    global _installed
    if not (os.environ.get(c.ENV_IAM_AUDIT_FILE) or os.environ.get(c.ENV_CALL_LOG_FILE)):
        return False
    with _lock:
        if _installed:
            return True
        _installed = True
    aws.instrument(_attach)
    return True


def _attach(client: Any) -> None:
    region = client.meta.region_name or "us-east-1"
    service = client.meta.service_model.endpoint_prefix

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        function = _current.get()
        if function is None:
            return
        caller = os.environ.get(c.ENV_REGION) or region
        log = os.environ.get(c.ENV_CALL_LOG_FILE)
        if log:
            call = {"ts_ms": int(time.time() * 1000), "function": function, "region": region}
            _append(log, {**call, "caller_region": caller, "service": service, "operation": model.name})
        path = os.environ.get(c.ENV_IAM_AUDIT_FILE)
        if not path:
            return
        where = {"region": region}
        if os.environ.get(c.ENV_REGION):  # multi-region: judged by the role in the caller's region
            where.update(caller_region=caller, regions=os.environ.get(c.ENV_REGIONS, ""))
        caller_role = {"function": function, "stage": os.environ.get(c.ENV_STAGE, ""), **where}
        keys = condition_keys(service, model.name, params)
        for action, resource in iam_requests(service, model.name, params, region):
            _write(path, {**caller_role, "action": action, "resource": resource, **keys})

    client.meta.events.register("provide-client-params", record, unique_id="sluice-callaudit")


def _write(path: str, record: dict[str, str]) -> None:
    """Each distinct call once per process."""
    key = (path, *record.items())
    with _lock:
        if key in _seen:
            return
        _seen.add(key)
    _append(path, record)


def _append(path: str, record: dict[str, Any]) -> None:
    """One O_APPEND write per line: lines from concurrent worker processes never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def load_call_log(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a `SLUICE_CALL_LOG_FILE`, in the order written."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def iam_requests(service: str, operation: str, params: dict[str, Any], region: str) -> list[tuple[str, str]]:
    """The (IAM action, resource ARN) pairs AWS authorizes for one API call (Service Authorization
    Reference). Operations not mapped here are recorded as `<service>:<Operation>` on `*`, so any
    call the roles do not grant shows up as denied rather than passing unseen."""
    mapper = _MAPPERS.get(service)
    found = mapper(operation, params, region) if mapper else None
    return found if found is not None else [(f"{service}:{operation}", "*")]


def condition_keys(service: str, operation: str, params: dict[str, Any]) -> dict[str, str]:
    """The request's IAM condition keys a role's statements test (as record fields): the prefix of an
    S3 listing (`s3:prefix`; the shard function may list `payload/` only)."""
    if service == "s3" and operation in ("ListObjectsV2", "ListObjects"):
        return {"s3:prefix": str(params.get("Prefix", ""))}
    return {}


def _arn(service: str, region: str, resource: str) -> str:
    return f"arn:{PARTITION}:{service}:{region}:{LOCAL_ACCOUNT}:{resource}"


def _dynamodb(op: str, params: dict[str, Any], region: str) -> list[tuple[str, str]] | None:
    def table(name: str, index: str | None = None) -> str:
        return _arn("dynamodb", region, f"table/{name}" + (f"/index/{index}" if index else ""))

    if op == "TransactWriteItems":  # authorized per item, by the item's own action
        kinds = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem"}
        kinds["ConditionCheck"] = "ConditionCheckItem"
        return [
            (f"dynamodb:{kinds[kind]}", table(body["TableName"]))
            for item in params.get("TransactItems", [])
            for kind, body in item.items()
        ]
    if op == "TransactGetItems":
        return [("dynamodb:GetItem", table(i["Get"]["TableName"])) for i in params.get("TransactItems", [])]
    if op in ("BatchGetItem", "BatchWriteItem"):
        return [(f"dynamodb:{op}", table(name)) for name in params.get("RequestItems", {})]
    if "TableName" in params:
        return [(f"dynamodb:{op}", table(params["TableName"], params.get("IndexName")))]
    return None


_S3_OBJECT_ACTIONS = {
    "GetObject": "s3:GetObject",
    "HeadObject": "s3:GetObject",
    "PutObject": "s3:PutObject",
    "CreateMultipartUpload": "s3:PutObject",
    "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
    "AbortMultipartUpload": "s3:AbortMultipartUpload",
    "DeleteObject": "s3:DeleteObject",
}
_S3_BUCKET_ACTIONS = {
    "ListObjectsV2": "s3:ListBucket",
    "ListObjects": "s3:ListBucket",
    "HeadBucket": "s3:ListBucket",
}


def _s3(op: str, params: dict[str, Any], region: str) -> list[tuple[str, str]] | None:
    bucket = params.get("Bucket")
    if not bucket:
        return None
    if op in _S3_OBJECT_ACTIONS:
        arn = f"arn:{PARTITION}:s3:::{bucket}/{params['Key']}"
        if op == "PutObject" and params.get("Tagging"):  # tags on upload need their own action
            return [("s3:PutObject", arn), ("s3:PutObjectTagging", arn)]
        return [(_S3_OBJECT_ACTIONS[op], arn)]
    if op == "DeleteObjects":
        keys = [o["Key"] for o in params.get("Delete", {}).get("Objects", [])]
        return [("s3:DeleteObject", f"arn:{PARTITION}:s3:::{bucket}/{key}") for key in keys]
    if op == "CopyObject":
        source = params["CopySource"]
        src = f"{source['Bucket']}/{source['Key']}" if isinstance(source, dict) else source.lstrip("/")
        return [
            ("s3:GetObject", f"arn:{PARTITION}:s3:::{src}"),
            ("s3:PutObject", f"arn:{PARTITION}:s3:::{bucket}/{params['Key']}"),
        ]
    if op in _S3_BUCKET_ACTIONS:
        return [(_S3_BUCKET_ACTIONS[op], f"arn:{PARTITION}:s3:::{bucket}")]
    return None


def _ssm(op: str, params: dict[str, Any], region: str) -> list[tuple[str, str]] | None:
    def parameter(name: str) -> str:
        return _arn("ssm", region, "parameter/" + name.lstrip("/"))

    if "Name" in params:
        return [(f"ssm:{op}", parameter(params["Name"]))]
    if "Names" in params:
        return [(f"ssm:{op}", parameter(name)) for name in params["Names"]]
    if op == "GetParametersByPath":
        return [(f"ssm:{op}", parameter(params["Path"]))]
    return None


def _lambda(op: str, params: dict[str, Any], region: str) -> list[tuple[str, str]] | None:
    if op != "Invoke":
        return None
    name = params["FunctionName"]
    arn = name if name.startswith("arn:") else _arn("lambda", region, f"function:{name}")
    return [("lambda:InvokeFunction", arn)]


def _secretsmanager(op: str, params: dict[str, Any], region: str) -> list[tuple[str, str]] | None:
    secret = params.get("SecretId")
    if not secret:
        return None
    arn = secret if secret.startswith("arn:") else _arn("secretsmanager", region, f"secret:{secret}")
    return [(f"secretsmanager:{op}", arn)]


_MAPPERS = {
    "dynamodb": _dynamodb,
    "s3": _s3,
    "ssm": _ssm,
    "lambda": _lambda,
    "secretsmanager": _secretsmanager,
}
