"""DynamoDB condition, key-condition and update expressions over low-level items ({"S": ...} values).

Covers the grammar the engine writes (comparisons, BETWEEN, AND/OR/NOT, attribute_exists,
attribute_not_exists, begins_with; SET with if_not_exists and + / -, ADD of numbers and string sets,
DELETE from string sets, REMOVE). Every operand reads the item as it was before the update, and two
actions on one path are refused as DynamoDB refuses them ("Two document paths overlap"). Parsed once
per expression text and cached: the engine sends a handful of distinct expressions millions of times.
Anything else raises `Unsupported` rather than being guessed.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache
from typing import Any

Item = dict[str, dict[str, Any]]

_TOKEN = re.compile(r"\s*(<>|<=|>=|[=<>(),+\-]|[#:]?[A-Za-z_][A-Za-z0-9_]*)")
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "SET", "ADD", "REMOVE", "DELETE"}


class Unsupported(Exception):
    """An expression outside the twin's grammar: extend the twin instead of guessing."""


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise Unsupported(f"cannot tokenize {text[pos:]!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok.upper() != expected):
            raise Unsupported(f"expected {expected!r} at {tok!r}")
        self.i += 1
        return tok

    # conditions -> nested tuples
    def cond(self) -> tuple:
        left = self.conj()
        while (self.peek() or "").upper() == "OR":
            self.take()
            left = ("or", left, self.conj())
        return left

    def conj(self) -> tuple:
        left = self.neg()
        while (self.peek() or "").upper() == "AND":
            self.take()
            left = ("and", left, self.neg())
        return left

    def neg(self) -> tuple:
        if (self.peek() or "").upper() == "NOT":
            self.take()
            return ("not", self.neg())
        return self.primary()

    def primary(self) -> tuple:
        if self.peek() == "(":
            self.take()
            inner = self.cond()
            self.take(")")
            return inner
        tok = self.peek() or ""
        if tok in ("attribute_exists", "attribute_not_exists", "begins_with"):
            self.take()
            self.take("(")
            args = [self.operand()]
            while self.peek() == ",":
                self.take()
                args.append(self.operand())
            self.take(")")
            return (tok, *args)
        left = self.operand()
        op = self.take()
        if op.upper() == "BETWEEN":
            lo = self.operand()
            self.take("AND")
            return ("between", left, lo, self.operand())
        if op not in ("=", "<>", "<", "<=", ">", ">="):
            raise Unsupported(f"comparison {op!r}")
        return ("cmp", op, left, self.operand())

    def operand(self) -> tuple:
        tok = self.take()
        if tok == "if_not_exists":
            self.take("(")
            path = self.operand()
            self.take(",")
            default = self.operand()
            self.take(")")
            return ("ifne", path, default)
        if tok.startswith(":"):
            return ("val", tok)
        if tok.upper() in _KEYWORDS or not re.match(r"#?[A-Za-z_]", tok):
            raise Unsupported(f"operand {tok!r}")
        return ("path", tok)

    def value_expr(self) -> tuple:
        left = self.operand()
        if self.peek() in ("+", "-"):
            op = self.take()
            return ("arith", op, left, self.operand())
        return left

    def update(self) -> list[tuple]:
        actions: list[tuple] = []
        while self.peek() is not None:
            clause = self.take().upper()
            while True:
                path = self.operand()
                if clause == "SET":
                    self.take("=")
                    actions.append(("set", path, self.value_expr()))
                elif clause == "ADD":
                    actions.append(("add", path, self.operand()))
                elif clause == "REMOVE":
                    actions.append(("remove", path))
                elif clause == "DELETE":
                    actions.append(("delete", path, self.operand()))
                else:
                    raise Unsupported(f"update clause {clause}")
                if self.peek() != ",":
                    break
                self.take()
        return actions


@lru_cache(maxsize=512)
def parse_condition(text: str) -> tuple:
    p = _Parser(text)
    tree = p.cond()
    if p.peek() is not None:
        raise Unsupported(f"trailing {p.peek()!r} in {text!r}")
    return tree


@lru_cache(maxsize=512)
def parse_update(text: str) -> tuple:
    return tuple(_Parser(text).update())


def _check_paths(actions: tuple, ctx: Context) -> None:
    seen: set[str] = set()
    for action in actions:
        name = ctx.attr(action[1])
        if name in seen:
            raise ValidationError(f"Invalid UpdateExpression: Two document paths overlap: {name}")
        seen.add(name)


class Context:
    """Names and values of one request."""

    def __init__(self, names: dict[str, str] | None, values: dict[str, Any] | None) -> None:
        self.names = names or {}
        self.values = values or {}

    def attr(self, path: tuple) -> str:
        tok = path[1]
        if tok.startswith("#"):
            if tok not in self.names:
                raise Unsupported(f"name {tok} not given")
            return self.names[tok]
        return tok

    def resolve(self, operand: tuple, item: Item | None) -> dict[str, Any] | None:
        kind = operand[0]
        if kind == "val":
            return self.values[operand[1]]
        if kind == "path":
            return (item or {}).get(self.attr(operand))
        if kind == "ifne":
            found = self.resolve(operand[1], item)
            return found if found is not None else self.resolve(operand[2], item)
        if kind == "arith":
            a, b = self.resolve(operand[2], item), self.resolve(operand[3], item)
            if a is None or b is None or "N" not in a or "N" not in b:
                raise ValidationError("An operand in the update expression has an incorrect data type")
            result = Decimal(a["N"]) + Decimal(b["N"]) * (1 if operand[1] == "+" else -1)
            return {"N": _num(result)}
        raise Unsupported(kind)


class ValidationError(Exception):
    pass


def _num(d: Decimal) -> str:
    text = format(d.normalize(), "f")
    return text


def _key(value: dict[str, Any]) -> tuple[str, Any]:
    ((kind, v),) = value.items()
    if kind == "N":
        return kind, Decimal(v)
    return kind, v


def evaluate(tree: tuple, item: Item | None, ctx: Context) -> bool:
    kind = tree[0]
    if kind == "and":
        return evaluate(tree[1], item, ctx) and evaluate(tree[2], item, ctx)
    if kind == "or":
        return evaluate(tree[1], item, ctx) or evaluate(tree[2], item, ctx)
    if kind == "not":
        return not evaluate(tree[1], item, ctx)
    if kind == "attribute_exists":
        return item is not None and ctx.attr(tree[1]) in item
    if kind == "attribute_not_exists":
        return item is None or ctx.attr(tree[1]) not in item
    if kind == "begins_with":
        a, b = ctx.resolve(tree[1], item), ctx.resolve(tree[2], item)
        if a is None or b is None:
            return False
        (ka, va), (kb, vb) = _key(a), _key(b)
        return ka == kb and ka in ("S", "B") and va.startswith(vb)
    if kind == "between":
        v, lo, hi = (ctx.resolve(x, item) for x in tree[1:])
        if v is None or lo is None or hi is None:
            return False
        (kv, vv), (kl, vl), (kh, vh) = _key(v), _key(lo), _key(hi)
        return kv == kl == kh and vl <= vv <= vh
    if kind == "cmp":
        op = tree[1]
        a, b = ctx.resolve(tree[2], item), ctx.resolve(tree[3], item)
        if a is None or b is None:
            return op == "<>" and (a is None) != (b is None)
        (ka, va), (kb, vb) = _key(a), _key(b)
        if op == "=":
            return ka == kb and va == vb
        if op == "<>":
            return ka != kb or va != vb
        if ka != kb or ka not in ("S", "N", "B"):
            return False
        return {"<": va < vb, "<=": va <= vb, ">": va > vb, ">=": va >= vb}[op]
    raise Unsupported(kind)


def apply_update(actions: tuple, item: Item, ctx: Context) -> Item:
    """A new item: every action's operands read the item as it was before the update (DynamoDB)."""
    _check_paths(actions, ctx)
    new = dict(item)
    for action in actions:
        name = ctx.attr(action[1])
        if action[0] == "set":
            value = ctx.resolve(action[2], item)
            if value is None:
                raise ValidationError("The provided expression refers to an attribute that does not exist")
            new[name] = value
        elif action[0] == "add":
            delta = ctx.resolve(action[2], item)
            old = item.get(name)
            if delta is not None and "SS" in delta:
                if old is not None and "SS" not in old:
                    raise ValidationError("An operand in the update expression has an incorrect data type")
                new[name] = {"SS": sorted(set(old["SS"] if old else []) | set(delta["SS"]))}
                continue
            if delta is None or "N" not in delta:
                raise Unsupported("ADD of a non-number")
            base = Decimal(old["N"]) if old else Decimal(0)
            new[name] = {"N": _num(base + Decimal(delta["N"]))}
        elif action[0] == "delete":
            delta = ctx.resolve(action[2], item)
            old = item.get(name)
            if delta is None or "SS" not in delta:
                raise Unsupported("DELETE of anything but a string set")
            if old is not None:
                left = set(old["SS"]) - set(delta["SS"])
                if left:
                    new[name] = {"SS": sorted(left)}
                else:
                    new.pop(name, None)  # an empty set is no attribute
        else:
            new.pop(name, None)
    return new
