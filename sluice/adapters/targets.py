"""Push targets: a webhook (HTTPS POST of the JSON batch, signed: sluice/webhooks.py), a Lambda function
(synchronous invoke: IAM authenticates it), or, in the local runtime, an in-process Python callable.
Each is a callable that returns on success and raises `TargetFailed` otherwise."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

import urllib3

from sluice.adapters import aws
from sluice.engine.push import PushConsumer, Target, validate_target

_http = urllib3.PoolManager(num_pools=16, maxsize=16, retries=False)


class TargetFailed(Exception):
    """The target did not take the batch: it is retried."""


def _python_target(spec: str) -> Callable[[dict[str, Any]], Any]:
    module_name, _, attr = spec.removeprefix("python:").partition(":")  # validate_target checked the form
    return getattr(importlib.import_module(module_name), attr)


def target_for(
    consumer: PushConsumer,
    *,
    allow_local: bool,
    sign: Callable[[bytes], dict[str, str]],
    lambda_endpoint: str | None = None,
) -> Target:
    """`sign(body)`: the signature headers of one webhook delivery attempt (`WebhookSigner.headers`)."""
    validate_target(consumer, allow_local=allow_local)
    if consumer.type == "webhook":
        url = consumer.url
        assert url is not None

        def webhook(payload: dict[str, Any]) -> None:
            body = json.dumps(payload).encode()
            headers = {"Content-Type": "application/json", "User-Agent": "sluice-push/1", **sign(body)}
            try:
                resp = _http.request(
                    "POST",
                    url,
                    body=body,
                    headers=headers,
                    timeout=urllib3.Timeout(connect=5, read=25),
                )
            except urllib3.exceptions.HTTPError as exc:
                raise TargetFailed(f"webhook unreachable: {exc}") from exc
            if not 200 <= resp.status < 300:
                raise TargetFailed(f"webhook answered {resp.status}")

        return webhook
    arn = consumer.function_arn or ""
    if arn.startswith("python:"):
        fn = _python_target(arn)

        def python(payload: dict[str, Any]) -> None:
            try:
                result = fn(payload)
            except Exception as exc:
                raise TargetFailed(f"callable raised {exc!r}") from exc
            if result is False:
                raise TargetFailed("callable returned False")

        return python

    def invoke(payload: dict[str, Any]) -> None:
        with aws.translated("Lambda"):
            resp = aws.client("lambda", lambda_endpoint).invoke(
                FunctionName=arn, InvocationType="RequestResponse", Payload=json.dumps(payload).encode()
            )
        if resp.get("FunctionError") or resp.get("StatusCode", 500) >= 300:
            raise TargetFailed(
                f"function {arn} failed: {resp.get('FunctionError') or resp.get('StatusCode')}"
            )

    return invoke
