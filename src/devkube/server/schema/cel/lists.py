"""Kubernetes' CEL ``lists`` and ``sets`` libraries (``k8s.io/apiserver/pkg/cel/library``), for
the dev cluster's CEL rules (docs/design.md §8, "CEL rules").

The runtime dispatches a Python function by the kinds of its arguments, not by element types,
so each function is one overload on ``list(dyn)`` that answers per element type at run time,
with the errors cel-go gives where kube's library has no overload (``sum`` of strings).
Equality is CEL's: ``1 == 1.0`` holds, ``true == 1`` does not (Python's ``==`` says both).
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

from cel_expr_python import cel  # type: ignore[import-untyped]

_T = cel.Type
_LIST = _T.List(_T.DYN)


def cel_equal(a: Any, b: Any) -> bool:
    """CEL's heterogeneous equality on the plain values the runtime hands a function."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(cel_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(cel_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, timedelta):
        return "duration"
    if isinstance(value, datetime):
        return "timestamp"
    return "list" if isinstance(value, list) else "map"


_ORDERED = frozenset({"int", "double", "string", "bytes", "duration", "timestamp"})
_SUMMABLE = frozenset({"int", "double", "duration"})


def _comparable(items: list[Any], function: str) -> list[Any]:
    kinds = {_kind(x) for x in items}
    numbers = kinds <= {"int", "double"}
    if not numbers and (len(kinds) > 1 or not kinds <= _ORDERED):
        raise ValueError(f"no such overload: {function}")
    return items


def _is_sorted(items: list[Any]) -> bool:
    _comparable(items, "isSorted")
    return all(a <= b for a, b in itertools.pairwise(items))


def _sum(items: list[Any]) -> Any:
    kinds = {_kind(x) for x in items}
    if not kinds:
        return 0
    if len(kinds) > 1 or not kinds <= _SUMMABLE:
        raise ValueError("no such overload: sum")
    total = items[0]
    for item in items[1:]:
        total = total + item
    if isinstance(total, int) and not -(2**63) <= total < 2**63:
        raise ValueError("integer overflow")
    return total


def _extreme(name: str, pick: Any) -> Any:
    def run(items: list[Any]) -> Any:
        if not items:
            raise ValueError(f"{name} called on empty list")
        return pick(_comparable(items, name))

    return run


def _index_of(items: list[Any], value: Any) -> int:
    return next((i for i, item in enumerate(items) if cel_equal(item, value)), -1)


def _last_index_of(items: list[Any], value: Any) -> int:
    found = [i for i, item in enumerate(items) if cel_equal(item, value)]
    return found[-1] if found else -1


def _contains(items: list[Any], wanted: list[Any]) -> bool:
    return all(any(cel_equal(a, b) for a in items) for b in wanted)


def _intersects(a: list[Any], b: list[Any]) -> bool:
    return any(any(cel_equal(x, y) for x in a) for y in b)


def _member(name: str, result: Any, params: list[Any], impl: Any) -> Any:
    return cel.FunctionDecl(
        name, [cel.Overload(f"list_{name}", result, params, is_member=True, impl=impl)]
    )


def _global(name: str, impl: Any) -> Any:
    overload = cel.Overload(name.replace(".", "_"), _T.BOOL, [_LIST, _LIST], impl=impl)
    return cel.FunctionDecl(name, [overload])


def collections_library() -> Any:
    """``lists``: isSorted, sum, min, max, indexOf, lastIndexOf; ``sets``: contains,
    equivalent, intersects."""
    return cel.CelExtension(
        "kubernetes.lists_sets",
        [
            _member("isSorted", _T.BOOL, [_LIST], _is_sorted),
            _member("sum", _T.DYN, [_LIST], _sum),
            _member("min", _T.DYN, [_LIST], _extreme("min", min)),
            _member("max", _T.DYN, [_LIST], _extreme("max", max)),
            _member("indexOf", _T.INT, [_LIST, _T.DYN], _index_of),
            _member("lastIndexOf", _T.INT, [_LIST, _T.DYN], _last_index_of),
            _global("sets.contains", _contains),
            _global("sets.equivalent", lambda a, b: _contains(a, b) and _contains(b, a)),
            _global("sets.intersects", _intersects),
        ],
    )
