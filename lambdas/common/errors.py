"""The one exception-to-HTTP registry: every domain error's status, and the error envelope."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from lambdas.common.observability import logger
from sluice import errors, names

# Most specific first: the first class an exception is an instance of decides its status.
STATUS: tuple[tuple[type[errors.SluiceError], int], ...] = (
    (errors.Unauthorized, 401),
    (errors.Forbidden, 403),
    (errors.MethodNotAllowed, 405),
    (errors.StreamGone, 410),
    (errors.StreamNameTooLong, 414),
    (errors.GatewayUriTooLong, 414),
    (errors.GatewayHeadersTooLarge, 431),
    (errors.GatewayPayloadTooLarge, 413),
    (errors.GatewayThrottled, 429),
    (errors.MessageTooLarge, 413),
    (errors.RequestTooLarge, 413),
    (errors.QueueNotFound, 404),
    (errors.ConsumerGroupNotFound, 404),
    (errors.TokenNotFound, 404),
    (errors.ConsumerNotFound, 404),
    (errors.NotFound, 404),
    (errors.QueueAlreadyExists, 409),
    (errors.ConsumerGroupAlreadyExists, 409),
    (errors.ConsumerAlreadyExists, 409),
    (errors.QueuePaused, 409),
    (errors.ProducerFenced, 409),
    (errors.IdempotencyKeyReused, 409),
    (errors.Conflict, 409),
    (errors.Throttled, 429),
    (errors.DependencyUnavailable, 503),
    (errors.InvalidRequest, 400),
)
INTERNAL_ERROR_CODE = 10500


def status_of(exc: errors.SluiceError) -> int:
    return next((status for cls, status in STATUS if isinstance(exc, cls)), 500)


def envelope(result: Any = None, *, errors_: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"success": not errors_, "errors": errors_ or [], "messages": [], "result": result}


def error_response(status: int, code: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=envelope(errors_=[{"code": code, "message": message}]),
        headers=headers or {},
    )


def error_headers(exc: errors.SluiceError) -> dict[str, str]:
    headers = {}
    if isinstance(exc, errors.Throttled | errors.DependencyUnavailable | errors.Conflict):
        headers["Retry-After"] = str(exc.retry_after_seconds)
    if isinstance(exc, errors.MethodNotAllowed):
        headers["Allow"] = exc.allow
    return headers


def rendered_by(
    exc: errors.SluiceError, render: Callable[[errors.SluiceError], Response]
) -> errors.SluiceError:
    """Mark an error to be answered by its face's own renderer instead of the envelope (a face whose
    protocol has another error shape raises through here)."""
    exc.render = render  # type: ignore[attr-defined]
    return exc


def _validation_message(exc: RequestValidationError) -> tuple[int, str]:
    """The code and message of a request that failed its model: names keep their own codes (an invalid
    queue name is 10102 wherever it appears), anything else is 10100 naming the field."""
    first = exc.errors()[0] if exc.errors() else {}
    kind = first.get("type")
    if kind == "json_invalid":
        return errors.MalformedJson.code, "the request body is not valid JSON"
    loc = tuple(first.get("loc", ()))
    where = ".".join(str(p) for p in (loc[1:] if loc[:1] in (("body",), ("query",)) else loc)) or "request"
    if kind in names.ERROR_CODES:
        return names.ERROR_CODES[kind], f"invalid {where}: {first.get('msg', 'bad value')}"
    if kind == "extra_forbidden":
        return errors.InvalidRequest.code, f"unknown field {where}: see docs/api.md for this request's fields"
    return errors.InvalidRequest.code, f"invalid {where}: {first.get('msg', 'bad value')}"


def register(app: APIGatewayHttpResolver) -> None:
    """Install the handlers: domain errors, validation errors, unknown routes, and bugs (500)."""

    @app.exception_handler(errors.SluiceError)
    def _domain(exc: errors.SluiceError) -> Response:
        render = getattr(exc, "render", None)
        if render is not None:
            return render(exc)
        return error_response(status_of(exc), exc.code, exc.message, error_headers(exc))

    @app.exception_handler(RequestValidationError)
    def _invalid(exc: RequestValidationError) -> Response:
        code, message = _validation_message(exc)
        return error_response(HTTPStatus.BAD_REQUEST, code, message)

    @app.not_found
    def _not_found(_exc: NotFoundError) -> Response:
        return error_response(HTTPStatus.NOT_FOUND, errors.NotFound.code, "no such route; see docs/api.md")

    @app.exception_handler(Exception)
    def _bug(exc: Exception) -> Response:
        logger.exception("unhandled error", exc_info=exc)
        return error_response(
            HTTPStatus.INTERNAL_SERVER_ERROR, INTERNAL_ERROR_CODE, "internal error; it has been logged"
        )
