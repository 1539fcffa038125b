"""Tied keys: `loss.beta: "1 - loss.alpha"`, small arithmetic over other config keys, evaluated safely.

The expression is parsed with `ast` and only a whitelist of nodes is accepted (numbers, dotted config keys,
+ - * / ** and unary minus, parentheses, and the functions min, max, abs, round), so a sweep file can never
run arbitrary code.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs, "round": round}
# Floats are rounded to this many significant digits, so "1 - 0.7" gives 0.3 rather than 0.30000000000000004
# (MLflow params and analysis groups compare the values as text).
_SIGNIFICANT_DIGITS = 12


class TiedExpressionError(ValueError):
    """The expression is malformed, uses something outside the whitelist, or refers to an unknown key."""


def _dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        parent = _dotted_name(node.value)
        return f"{parent}.{node.attr}" if parent else None
    return None


def _check(node: ast.expr, names: set[str]) -> None:
    """Reject every node outside the whitelist; collect the dotted config keys used."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise TiedExpressionError(f"only numbers are allowed as constants, got {node.value!r}")
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _check(node.left, names)
        _check(node.right, names)
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        _check(node.operand, names)
    elif isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS) or node.keywords:
            raise TiedExpressionError(f"only calls to {', '.join(_FUNCTIONS)} are allowed")
        for argument in node.args:
            _check(argument, names)
    elif (name := _dotted_name(node)) is not None:
        if name in _FUNCTIONS:
            raise TiedExpressionError(f"{name!r} is a function, not a config key")
        if any(part.startswith("_") for part in name.split(".")):
            raise TiedExpressionError(f"{name!r} is not a config key")
        names.add(name)
    else:
        raise TiedExpressionError(f"{ast.unparse(node)!r} is not allowed (numbers, config keys, + - * / **)")


@dataclass(frozen=True)
class TiedExpression:
    source: str
    names: frozenset[str] = field(init=False)  # the config keys the expression reads

    def __post_init__(self) -> None:
        names: set[str] = set()
        _check(self._tree(), names)
        object.__setattr__(self, "names", frozenset(names))

    def _tree(self) -> ast.expr:
        try:
            return ast.parse(self.source.strip(), mode="eval").body
        except SyntaxError:
            raise TiedExpressionError(f"cannot parse {self.source!r}") from None

    def evaluate(self, lookup: Callable[[str], Any]) -> float | int:
        """`lookup(dotted_key)` returns the trial's value of a config key (KeyError when there is none)."""

        def value(node: ast.expr) -> Any:
            if isinstance(node, ast.Constant):
                return node.value
            if isinstance(node, ast.BinOp):
                return _BINARY[type(node.op)](value(node.left), value(node.right))
            if isinstance(node, ast.UnaryOp):
                return _UNARY[type(node.op)](value(node.operand))
            if isinstance(node, ast.Call):
                return _FUNCTIONS[node.func.id](*(value(argument) for argument in node.args))  # type: ignore[attr-defined]
            name = _dotted_name(node)
            try:
                found = lookup(name)  # type: ignore[arg-type]
            except KeyError:
                raise TiedExpressionError(f"{self.source!r} refers to {name!r}, which is not set") from None
            if isinstance(found, bool) or not isinstance(found, int | float):
                raise TiedExpressionError(f"{self.source!r}: {name!r} is {found!r}, not a number")
            return found

        try:
            result = value(self._tree())
        except (ArithmeticError, ValueError, TypeError) as error:
            if isinstance(error, TiedExpressionError):
                raise
            raise TiedExpressionError(f"{self.source!r}: {error}") from None
        if isinstance(result, float):
            if not math.isfinite(result):
                raise TiedExpressionError(f"{self.source!r} is not finite ({result})")
            return float(f"{result:.{_SIGNIFICANT_DIGITS}g}")
        return result
