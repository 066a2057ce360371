"""The base of every JSON request body: strict validation (each face's bodies live in its folder)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Request bodies: an unknown field or a value of the wrong JSON type (`"5"` or `true` for a number)
    is a 400 (10100), never ignored or coerced, so a typo cannot silently fall back to a default and
    padding cannot ride along."""

    model_config = ConfigDict(extra="forbid", strict=True)
