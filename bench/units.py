"""DynamoDB item sizes and the capacity units they cost: the one implementation the bench uses.

Item size, from "DynamoDB item sizes and formats"
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
the sum over attributes of the attribute name's UTF-8 bytes plus the value's size, where

- String: its UTF-8 bytes; Binary: its raw bytes (not the base64 sent on the wire);
- Number: 1 byte per two significant digits + 1 byte (leading and trailing zeros trimmed);
- Null and Boolean: 1 byte;
- List and Map: 3 bytes of overhead + the sizes of the nested elements + 1 byte per element
  (a Map element also counts its key's UTF-8 bytes);
- String, Number and Binary sets: the sum of their elements' sizes.

Units (on-demand request units or provisioned capacity units, the same count): a write costs
ceil(size / 1 KB), at least 1; a read ceil(size / 4 KB), at least 1, half of that when eventually
consistent. How each operation applies them is in bench/accounting.py.
"""

from __future__ import annotations

import base64
import math
from decimal import Decimal
from typing import Any

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
CONTAINER_OVERHEAD = 3  # List and Map
ELEMENT_OVERHEAD = 1  # per List or Map element


def number_size(text: str) -> int:
    """A DynamoDB Number as sent on the wire (`"1700000000000"`, `"-0.050"`, `"1E+5"`)."""
    # as_tuple keeps every digit (normalize() would round to the context's 28); trim zeros by hand.
    digits = "".join(map(str, Decimal(text).as_tuple().digits)).strip("0") or "0"
    return 1 + math.ceil(len(digits) / 2)


def value_size(value: dict[str, Any]) -> int:
    """Bytes of one low-level attribute value (`{"S": "x"}`, `{"M": {...}}`, ...)."""
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return number_size(v)
    if kind == "B":
        return len(v) if isinstance(v, bytes | bytearray) else len(base64.b64decode(v))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return CONTAINER_OVERHEAD + sum(
            len(k.encode()) + value_size(x) + ELEMENT_OVERHEAD for k, x in v.items()
        )
    if kind == "L":
        return CONTAINER_OVERHEAD + sum(value_size(x) + ELEMENT_OVERHEAD for x in v)
    if kind == "SS":
        return sum(len(x.encode()) for x in v)
    if kind == "NS":
        return sum(number_size(x) for x in v)
    if kind == "BS":
        return sum(value_size({"B": x}) for x in v)
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def item_size(item: dict[str, Any] | None) -> int:
    """Bytes of a low-level item (attribute name → typed value); a missing item is 0."""
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return units if consistent else units / 2
