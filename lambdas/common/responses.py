"""What every face's response models build on. Response bodies are pydantic models, the routes' return
annotations (`Response[Envelope[QueueView]]`), so Powertools documents them in OpenAPI and checks each
answer against them before it leaves; each face keeps its own in its folder (`responses.py`).

`Wire` models keep a body's keys exactly as the route built them: a key the route left out stays out
(no `null` appears) and a key not declared here passes through, so the check never reshapes an answer."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class Wire(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @model_serializer(mode="wrap")
    def _as_sent(self, handler: SerializerFunctionWrapHandler):
        # No return annotation: pydantic then documents the model's own fields, not `dict[str, Any]`.
        data = handler(self)
        kept = {f.alias or n for n, f in type(self).model_fields.items() if n in self.model_fields_set}
        return {k: v for k, v in data.items() if k in kept or k in (self.model_extra or {})}


T = TypeVar("T")


class ErrorItem(Wire):
    code: int
    message: str


class Envelope(Wire, Generic[T]):
    """Every native and Cloudflare answer: Cloudflare's v4 envelope."""

    success: bool
    errors: list[ErrorItem]
    messages: list[Any]
    result: T


def body_of(model: type[BaseModel]) -> dict[int, OpenAPIResponse]:
    """OpenAPI `responses` of a route that writes its JSON body itself (the Durable Streams face embeds
    stored record text without a parse and dump): the shape is documented, not checked on the way out."""
    return {200: {"description": "Successful Response", "content": {"application/json": {"model": model}}}}
