"""Kubernetes' CEL quantity library for the dev cluster's CEL rules (``rules``).

kube-apiserver adds ``isQuantity(string)``, ``quantity(string)`` and a Quantity type with
``isLessThan``, ``isGreaterThan``, ``compareTo``, ``add``, ``sub``, ``sign``, ``isInteger``,
``asInteger`` and ``asApproximateFloat``. Here a Quantity is a CEL map holding its exact value
(kubefacts' parser, the one the scheduler uses) under a key no schema field can have, so
rules type-check and compare exactly; printing one shows that map, not Go's canonical form.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from cel_expr_python import cel  # type: ignore[import-untyped]

from kubefacts.quantities import parse_quantity

_KEY = "__kubernetes_quantity__"
_T = cel.Type
QUANTITY = _T.Map(_T.STRING, _T.DYN)


def _wrap(value: Fraction) -> dict[str, str]:
    return {_KEY: str(value)}


def _value(q: Any) -> Fraction:
    return Fraction(str(q[_KEY]))


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except ValueError:
        return False
    return True


def _quantity(text: str) -> dict[str, str]:
    return _wrap(parse_quantity(text))


def _compare(a: Any, b: Any) -> int:
    left, right = _value(a), _value(b)
    return (left > right) - (left < right)


def _as_integer(q: Any) -> int:
    value = _value(q)
    if value.denominator != 1 or not -(2**63) <= value < 2**63:
        raise ValueError("cannot convert value to integer")
    return int(value)


def _member(name: str, result: Any, params: list[Any], impl: Any, overload: str = "") -> Any:
    return cel.Overload(f"quantity_{overload or name}", result, params, is_member=True, impl=impl)


def quantity_library() -> Any:
    """The library as a cel-expr-python extension."""
    q = QUANTITY
    decls = [
        cel.FunctionDecl(
            "isQuantity",
            [cel.Overload("is_quantity_string", _T.BOOL, [_T.STRING], impl=_is_quantity)],
        ),
        cel.FunctionDecl(
            "quantity", [cel.Overload("quantity_string", q, [_T.STRING], impl=_quantity)]
        ),
        cel.FunctionDecl(
            "isLessThan", [_member("isLessThan", _T.BOOL, [q, q], lambda a, b: _compare(a, b) < 0)]
        ),
        cel.FunctionDecl(
            "isGreaterThan",
            [_member("isGreaterThan", _T.BOOL, [q, q], lambda a, b: _compare(a, b) > 0)],
        ),
        cel.FunctionDecl("compareTo", [_member("compareTo", _T.INT, [q, q], _compare)]),
        cel.FunctionDecl(
            "add",
            [
                _member("add", q, [q, q], lambda a, b: _wrap(_value(a) + _value(b))),
                _member("add", q, [q, _T.INT], lambda a, b: _wrap(_value(a) + b), "add_int"),
            ],
        ),
        cel.FunctionDecl(
            "sub",
            [
                _member("sub", q, [q, q], lambda a, b: _wrap(_value(a) - _value(b))),
                _member("sub", q, [q, _T.INT], lambda a, b: _wrap(_value(a) - b), "sub_int"),
            ],
        ),
        cel.FunctionDecl(
            "sign", [_member("sign", _T.INT, [q], lambda a: (_value(a) > 0) - (_value(a) < 0))]
        ),
        cel.FunctionDecl(
            "isInteger", [_member("isInteger", _T.BOOL, [q], lambda a: _value(a).denominator == 1)]
        ),
        cel.FunctionDecl("asInteger", [_member("asInteger", _T.INT, [q], _as_integer)]),
        cel.FunctionDecl(
            "asApproximateFloat",
            [_member("asApproximateFloat", _T.DOUBLE, [q], lambda a: float(_value(a)))],
        ),
    ]
    return cel.CelExtension("kubernetes.quantity", decls)
