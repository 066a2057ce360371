"""Consumer groups, queue operations and metrics on the native face (`/v1/queues/{q}/...`)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import ConfigDict, Field

from lambdas.common.http import ok, principal_of
from lambdas.common.runtime import service
from lambdas.common.schemas import Lenient
from sluice.models import GROUP_NAME_PATTERN, QUEUE_NAME_PATTERN

router = APIGatewayHttpRouter()


class CreateGroup(Lenient):
    name: str = Field(pattern=GROUP_NAME_PATTERN)
    start: str | int = Field("earliest", description="'earliest', 'latest' or a timestamp in ms (inclusive)")


class Redrive(Lenient):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    from_queue: str = Field(alias="from", pattern=QUEUE_NAME_PATTERN, description="the dead letter queue")
    max_messages: int | None = Field(None, ge=1, description="at most this many; all when absent")


@router.post("/v1/queues/<queue_name>/consumer-groups")
def create_group(queue_name: str, body: Annotated[CreateGroup, Body()]) -> Response[dict]:
    return ok(service().groups.create(queue_name, body.name, body.start), status=201)


@router.get("/v1/queues/<queue_name>/consumer-groups")
def list_groups(queue_name: str) -> Response[dict]:
    return ok({"consumer_groups": service().groups.list(queue_name)})


@router.get("/v1/queues/<queue_name>/consumer-groups/<group>")
def get_group(queue_name: str, group: str) -> Response[dict]:
    return ok(service().groups.get(queue_name, group))


@router.delete("/v1/queues/<queue_name>/consumer-groups/<group>")
def delete_group(queue_name: str, group: str) -> Response[dict]:
    service().groups.delete(queue_name, group)
    return ok(None)


@router.post("/v1/queues/<queue_name>/purge")
def purge(queue_name: str) -> Response[dict]:
    return ok(service().operations.purge(queue_name))


@router.post("/v1/queues/<queue_name>/pause")
def pause(queue_name: str) -> Response[dict]:
    return ok(service().queues.set_paused(queue_name, True).public())


@router.post("/v1/queues/<queue_name>/resume")
def resume(queue_name: str) -> Response[dict]:
    return ok(service().queues.set_paused(queue_name, False).public())


@router.post("/v1/queues/<queue_name>/redrive")
def redrive(queue_name: str, body: Annotated[Redrive, Body()]) -> Response[dict]:
    engine = service()
    # The route checked admin on the target queue; draining the DLQ needs admin there too.
    engine.tokens.authorize(principal_of(router), "admin", body.from_queue)
    return ok(engine.operations.redrive(queue_name, body.from_queue, body.max_messages))


@router.get("/v1/queues/<queue_name>/metrics")
def metrics(queue_name: str) -> Response[dict]:
    return ok(service().operations.metrics(queue_name))
