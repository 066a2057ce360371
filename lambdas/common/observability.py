"""Logs, traces and metrics of every function: one Powertools Logger, Tracer and Metrics, configured here.

- Logger: Powertools' JSON logs on the stdlib logger named `sluice` (`SERVICE_NAME`). The engine stays
  free of Powertools and logs through `logging.getLogger(__name__)`, so every `sluice.*` logger is a
  child of this one: its records propagate to the Powertools handler and come out as the same JSON
  lines, with the Lambda context, the logger's name and the invocation's correlation id.
- Tracer: X-Ray, which the stack turns on for every function (`tracing=ACTIVE`). Creating it patches
  botocore, so every AWS call is a subsegment of the handler's. Outside Lambda (`sluice local`, tests,
  the import bench) no Tracer is made at all: Powertools' own rule turns tracing off there, but even
  a disabled Tracer imports aws_xray_sdk (about 0.3 s of CPU per process, more on a loaded machine).
- Metrics: EMF in the namespace and service of `sluice.constants`.
- Correlation ids: API Gateway's request id for HTTP calls; for a function another one started, the
  sender's id carried on the event (`sluice.events`, `CORRELATION_KEY`); else the invocation's own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from sluice import constants as c
from sluice.events import CORRELATION_KEY

# `name`: which module logged (`sluice.engine.push`, ...); a constructor key survives `clear_state`.
logger = Logger(service=c.SERVICE_NAME, name="%(name)s")
# Powertools' rule (in Lambda, not under SAM/Chalice, POWERTOOLS_TRACE_DISABLED unset), asked before
# the Tracer exists, because making one imports aws_xray_sdk whether it then traces or not.
tracer: Tracer | None = None if Tracer._is_tracer_disabled() else Tracer(service=c.SERVICE_NAME)
metrics = Metrics(namespace=c.METRICS_NAMESPACE, service=c.SERVICE_NAME)

HandlerT = TypeVar("HandlerT", bound=Callable[..., Any])


def http_function(handler: HandlerT) -> HandlerT:
    """An API Gateway (HTTP API) entry point: JSON logs keyed by the gateway's request id, traced.
    Responses are not recorded in the trace (a pull answers up to 5 MB; X-Ray keeps 64 KB)."""
    return logger.inject_lambda_context(
        correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True
    )(_traced(handler))


def event_function(handler: HandlerT) -> HandlerT:
    """An entry point started by the schedule or by another function: keyed by the sender's correlation
    id when the event carries one, else by this invocation's request id; traced."""

    @functools.wraps(handler)
    def correlated(event: Any, context: LambdaContext) -> Any:
        sender = event.get(CORRELATION_KEY) if isinstance(event, dict) else None
        logger.set_correlation_id(sender or context.aws_request_id)
        return handler(event, context)

    return logger.inject_lambda_context(clear_state=True)(_traced(correlated))


def _traced(handler: Callable[..., Any]) -> Any:
    """The handler as one X-Ray subsegment (`## <name>`) when tracing is on; as it is otherwise."""
    if tracer is None:
        return handler
    return tracer.capture_lambda_handler(capture_response=False)(handler)


def correlation_id() -> str | None:
    """The id the current invocation logs under; senders put it on the events they send."""
    return logger.get_correlation_id()
