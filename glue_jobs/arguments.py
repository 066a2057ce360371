"""Job arguments: Glue's `--key value` pairs into a frozen dataclass (one per job), with a clear error for
a missing or malformed one.

Each field of the dataclass is an option, spelled `--field_name` or `--field-name` (Glue's own arguments
use either); a field without a default is required. The values are converted to the field's type; a
`bool` may be given bare (`--verify-output`). Arguments that name no field (`--TempDir`,
`--job-bookmark-option`, ... which Glue adds) are ignored. argparse does the parsing; this module only
derives the parser from the dataclass.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# Other spellings of fields: Glue's job name, and the default arguments the CDK stack (stacks/glue.py) sets.
ALIASES = {
    "JOB_NAME": "job_name",
    "sluice_api_url": "url",
    "sluice_token_secret_arn": "token_secret_arn",
    "sluice_segment_bucket": "bucket",
    "sluice_output_path": "output",
}

A = TypeVar("A", bound="DataclassInstance")


class ArgumentError(ValueError):
    """A job argument is missing or has a value of the wrong kind; the message names it."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> typing.NoReturn:
        raise ArgumentError(message)


def boolean(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(value)


def int_list(value: str) -> tuple[int, ...]:
    """`1,2,5` (blanks ignored)."""
    return tuple(int(part) for part in value.split(",") if part.strip())


def _converter(hint: Any) -> tuple[Callable[[str], Any], bool]:
    """(string -> value, is a bool) for a field's type; `X | None` converts as X."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported argument type {hint!r}")
        hint = inner[0]
    if hint is bool:
        return boolean, True
    if hint in (str, int, float):
        return hint, False
    if hint == tuple[int, ...]:
        return int_list, False
    raise TypeError(f"unsupported argument type {hint!r}")


def parse_args(kind: type[A], argv: Sequence[str]) -> A:
    """An instance of the dataclass `kind` from `argv`. Raises ArgumentError naming the argument."""
    parser = _Parser(prog=kind.__name__, add_help=False, allow_abbrev=False)
    hints = typing.get_type_hints(kind)
    for f in dataclasses.fields(kind):
        spellings = [f.name, f.name.replace("_", "-"), *(a for a, name in ALIASES.items() if name == f.name)]
        names = [f"--{name}" for name in dict.fromkeys(spellings)]
        convert, is_bool = _converter(hints[f.name])
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        options: dict[str, Any] = {"dest": f.name, "type": convert, "required": required}
        if not required:
            options["default"] = f.default
        if is_bool:
            options.update(nargs="?", const=True)
        parser.add_argument(*names, **options)
    known, _glue_arguments = parser.parse_known_args(list(argv))
    return kind(**vars(known))


def check(condition: bool, message: str) -> None:
    """For the dataclasses' `__post_init__`: refuse a combination of values the types cannot express."""
    if not condition:
        raise ArgumentError(message)
