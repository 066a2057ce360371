"""Stream reads on the native face: `GET /v1/queues/{q}/records` and `/shards`."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from lambdas.common.http import RESPONSE_BUDGET_BYTES, encoded_size, ok
from lambdas.common.responses import Envelope
from lambdas.common.runtime import service
from lambdas.faces.native.responses import Records, Shards
from sluice import errors
from sluice.codec import body_to_native
from sluice.engine.streams import MAX_LIMIT, MAX_TIMEOUT_MS, parse_position
from sluice.models import MAX_SHARD_ID, MAX_TIMESTAMP_MS
from sluice.segments import Record

router = APIGatewayHttpRouter()


def native_record(r: Record, region: str | None = None) -> dict[str, Any]:
    """One record of a native stream read; `region` (multi-region deployments) says where its shard is
    (a few bytes a record: the response budget's margin holds them)."""
    return {
        "offset": r.offset,
        "shard": r.shard,
        "id": r.id,
        "body": body_to_native(r.body, r.content_type),
        "content_type": r.content_type,
        "timestamp_ms": r.timestamp_ms,
        "partition_key": r.partition_key,
        "attributes": r.attributes,
        **({"region": region} if region else {}),
    }


@router.get("/v1/queues/<queue_name>/records")
def records(
    queue_name: str,
    offset: Annotated[str | None, Query(max_length=4096)] = None,
    start: Annotated[int | None, Query(ge=0, le=MAX_TIMESTAMP_MS)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 10,
    timeout_sec: Annotated[float, Query(ge=0, le=MAX_TIMEOUT_MS / 1000)] = 0,
    shard: Annotated[int | None, Query(ge=0, le=MAX_SHARD_ID)] = None,
) -> Response[Envelope[Records]]:
    if offset is not None and start is not None:
        raise errors.InvalidOffset("pass either offset or start, not both")
    page = service().reader.read(
        queue_name,
        parse_position(offset, start, shard),
        limit=limit,
        shard=shard,
        timeout_ms=int(timeout_sec * 1000),
        size_of=lambda r: encoded_size(native_record(r)),
        max_bytes=RESPONSE_BUDGET_BYTES,
    )
    records = [native_record(r, page.regions.get(r.shard)) for r in page.records]
    return ok({"records": records, "next_offset": page.next_offset})


@router.get("/v1/queues/<queue_name>/shards")
def shards(queue_name: str) -> Response[Envelope[Shards]]:
    return ok({"shards": service().reader.shard_ranges(queue_name)})
