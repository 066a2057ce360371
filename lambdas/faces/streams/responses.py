"""Response bodies of the Durable Streams face (`/streams/{name}`): bodies written by the routes themselves,
documented through `body_of`."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from lambdas.common.responses import Wire


class StreamAppended(Wire):
    offsets: list[str] | None = Field(None, description="one per record appended")
    version: int | None = Field(None, description="an empty `records` bumps the version only")


class StreamRecord(Wire):
    offset: str
    data: Any


class StreamRecords(Wire):
    records: list[StreamRecord]


class StreamDeleted(Wire):
    success: bool
