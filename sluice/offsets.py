"""Per-shard offsets: `<16-digit ms><16-digit sequence>`, string-sortable in publish order."""

from __future__ import annotations

import re

OFFSET_RE = re.compile(r"\A[0-9]{32}\Z")  # ASCII digits only, no trailing newline
TIME_PREFIX_RE = re.compile(r"\A[0-9]{16}\Z")
BEGINNING = "-"


def encode(timestamp_ms: int, seq: int) -> str:
    return f"{timestamp_ms:016d}{seq:016d}"


def time_prefix(timestamp_ms: int) -> str:
    """The 16-digit form of a time position (records at or after it)."""
    return f"{timestamp_ms:016d}"


def decode(offset: str) -> tuple[int, int]:
    """(timestamp_ms, seq) of a 32-digit offset."""
    if not OFFSET_RE.match(offset):
        raise ValueError(f"offset must be 32 digits, got {offset!r}")
    return int(offset[:16]), int(offset[16:])


def seq_key(seq: int) -> str:
    """Zero-padded so that sort keys order like the numbers."""
    return f"{seq:016d}"


def sequence(position: str | int) -> int:
    """The sequence of a position given either as a 32-digit offset or as a plain sequence number."""
    text = str(position)
    return decode(text)[1] if OFFSET_RE.match(text) else int(text)
