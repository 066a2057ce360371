"""Lambda containers for the local runtime: each worker process imports a handler and runs one event
at a time, as a Lambda container does (Powertools resolvers keep per-request state on the app)."""

from __future__ import annotations

import importlib
import logging
import os
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from sluice.constants import FUNCTION_HANDLERS
from sluice.local import callaudit

INVOKE_TIMEOUT_SECONDS = 30  # API Gateway's integration timeout


class LocalContext:
    """The parts of the Lambda context object that Powertools and the handlers read."""

    memory_limit_in_mb = 512
    function_version = "$LATEST"
    log_group_name = "/aws/lambda/local"
    log_stream_name = "local"

    def __init__(self, function: str, timeout_seconds: float) -> None:
        self.function_name = f"sluice-local-{function}"
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"
        self.aws_request_id = uuid.uuid4().hex
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _init(env: dict[str, str]) -> None:
    os.environ.update(env)


def _handler(function: str) -> Any:
    module_name, _, attr = FUNCTION_HANDLERS[function].rpartition(".")
    return getattr(importlib.import_module(module_name), attr)


def _import(function: str) -> None:
    _handler(function)


def invoke(function: str, event: dict[str, Any], timeout_seconds: float = INVOKE_TIMEOUT_SECONDS) -> Any:
    callaudit.install_from_env()  # tests record this function's AWS calls for the IAM audit
    with callaudit.attributed(function):
        return _handler(function)(event, LocalContext(function, timeout_seconds))


class FunctionPool:
    """Up to `concurrency` containers of one function, started on demand."""

    def __init__(self, function: str, concurrency: int, env: dict[str, str]) -> None:
        self.function = function
        self._pool = ProcessPoolExecutor(
            max_workers=concurrency, mp_context=get_context("spawn"), initializer=_init, initargs=(env,)
        )

    def invoke(self, event: dict[str, Any], timeout_seconds: float = INVOKE_TIMEOUT_SECONDS) -> Any:
        return self._pool.submit(invoke, self.function, event, timeout_seconds).result(timeout_seconds + 5)

    def submit(self, event: dict[str, Any], timeout_seconds: float = INVOKE_TIMEOUT_SECONDS) -> None:
        """Run `event` without waiting for it (asynchronous invocation); failures are logged."""
        future = self._pool.submit(invoke, self.function, event, timeout_seconds)
        future.add_done_callback(_log_failure)

    def warm(self) -> None:
        """Import the handler in one container now, so the first request does not pay for it."""
        self._pool.submit(_import, self.function).result(60)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _log_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        logging.getLogger("sluice.local").warning("async invocation failed: %r", future.exception())
