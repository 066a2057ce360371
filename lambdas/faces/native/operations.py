"""Consumer groups, queue operations and metrics on the native face (`/v1/queues/{q}/...`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import ConfigDict, Field, ValidationError, ValidatorFunctionWrapHandler, WrapValidator
from pydantic_core import PydanticCustomError

from lambdas.common.http import ok, principal_of
from lambdas.common.responses import Envelope
from lambdas.common.runtime import service
from lambdas.common.schemas import Strict
from lambdas.faces.native.responses import Group, Groups, Purged, QueueMetrics, QueueView, Redriven
from sluice.models import MAX_COUNT, MAX_TIMESTAMP_MS
from sluice.names import GroupName, QueueName

router = APIGatewayHttpRouter()


def _one_start_error(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """One message for the union instead of one per branch."""
    try:
        return handler(value)
    except ValidationError:
        raise PydanticCustomError(
            "start",
            f"use 'earliest', 'latest' or a timestamp in milliseconds (an integer 0..{MAX_TIMESTAMP_MS})",
        ) from None


class CreateGroup(Strict):
    name: GroupName
    start: Annotated[
        Literal["earliest", "latest"] | Annotated[int, Field(ge=0, le=MAX_TIMESTAMP_MS)],
        WrapValidator(_one_start_error),
    ] = Field("earliest", description="'earliest', 'latest' or a timestamp in ms (inclusive)")


class Redrive(Strict):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    from_queue: QueueName = Field(alias="from", description="the queue's dead_letter_queue")
    max_messages: int | None = Field(
        None, ge=1, le=MAX_COUNT, description="at most this many; all when absent"
    )


@router.post("/v1/queues/<queue_name>/consumer-groups", status_code=201)
def create_group(queue_name: str, body: Annotated[CreateGroup, Body()]) -> Response[Envelope[Group]]:
    return ok(service().groups.create(queue_name, body.name, body.start), status=201)


@router.get("/v1/queues/<queue_name>/consumer-groups")
def list_groups(queue_name: str) -> Response[Envelope[Groups]]:
    return ok({"consumer_groups": service().groups.list(queue_name)})


@router.get("/v1/queues/<queue_name>/consumer-groups/<group>")
def get_group(queue_name: str, group: str) -> Response[Envelope[Group]]:
    return ok(service().groups.get(queue_name, group))


@router.delete("/v1/queues/<queue_name>/consumer-groups/<group>")
def delete_group(queue_name: str, group: str) -> Response[Envelope[None]]:
    service().groups.delete(queue_name, group)
    return ok(None)


@router.post("/v1/queues/<queue_name>/purge")
def purge(queue_name: str) -> Response[Envelope[Purged]]:
    return ok(service().operations.purge(queue_name))


@router.post("/v1/queues/<queue_name>/pause")
def pause(queue_name: str) -> Response[Envelope[QueueView]]:
    return ok(service().queues.set_paused(queue_name, True).public())


@router.post("/v1/queues/<queue_name>/resume")
def resume(queue_name: str) -> Response[Envelope[QueueView]]:
    return ok(service().queues.set_paused(queue_name, False).public())


@router.post("/v1/queues/<queue_name>/redrive")
def redrive(queue_name: str, body: Annotated[Redrive, Body()]) -> Response[Envelope[Redriven]]:
    engine = service()
    # The route checked admin on the target queue; draining the DLQ needs admin there too.
    engine.tokens.authorize(principal_of(router), "admin", body.from_queue)
    return ok(engine.operations.redrive(queue_name, body.from_queue, body.max_messages))


@router.get("/v1/queues/<queue_name>/metrics")
def metrics(queue_name: str) -> Response[Envelope[QueueMetrics]]:
    return ok(service().operations.metrics(queue_name))
