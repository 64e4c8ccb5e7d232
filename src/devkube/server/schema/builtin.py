"""Built-in kinds decoded as kube-apiserver's Go decoder decodes them.

The real server turns a request body into a Go struct: a field the struct lacks is dropped
(and, under ``fieldValidation=Strict``, refused; under ``Warn``, reported in a ``Warning``
header), and a value of the wrong JSON type fails the whole request with Go's own message:

    Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go
    struct field ContainerPort.spec.containers.ports.containerPort of type int32

The types come from ``builtin_schemas.json``, generated from Kubernetes' OpenAPI by
``deploy/k8s_schemas.py``. Semantic rules (names, required fields, ports) stay in
``validation.py``; defaults in ``defaults.py``. IntOrString and times only get their JSON kind
checked (their Go decoders are custom); a quantity map's values (resources, quota ``hard``,
LimitRange bounds) are parsed as Go's ``ParseQuantity`` does, and a ``[]byte`` map's (a
Secret's ``data``) as base64, and a malformed one fails the request with Go's error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from devkube.server.schema import gobase64
from kubefacts.quantities import go_parse_error

Node = Mapping[str, Any]
_INT_BOUNDS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


@dataclass
class Decoded:
    obj: Any
    unknown: list[str] = field(default_factory=list)
    #: Go's unmarshal error, if a value had the wrong type (the request fails with it).
    type_error: str | None = None


@cache
def _document() -> dict[str, Any]:
    text = resources.files("devkube.server.schema").joinpath("builtin_schemas.json").read_text()
    doc: dict[str, Any] = json.loads(text)
    return doc


def has_schema(api_version: str, kind: str) -> bool:
    return f"{api_version}/{kind}" in _document()["kinds"]


def decode(obj: dict[str, Any], api_version: str, kind: str) -> Decoded:
    """Drop (in place) and list the fields ``kind`` does not have; find the first type error."""
    out = Decoded(obj)
    name = _document()["kinds"].get(f"{api_version}/{kind}")
    if name is not None:
        _walk_object(obj, _compiled(name), "", "", out)
    return out


_PY_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


class _Node:
    """A schema node compiled for speed: the Python types it admits and its children."""

    __slots__ = ("any", "bounds", "go", "items", "leaf", "props", "struct", "types", "values")

    def __init__(self) -> None:
        self.types: frozenset[type] = frozenset()
        self.go = ""
        self.struct = ""
        self.props: dict[str, _Node] | None = None
        self.items: _Node | None = None
        self.values: _Node | None = None
        self.bounds: tuple[int, int] | None = None
        self.any = False
        #: A scalar (or free-form) value: only its type and bounds are checked.
        self.leaf = False


_COMPILED: dict[str, _Node] = {}
RAW_EXTENSION = "io.k8s.apimachinery.pkg.runtime.RawExtension"
#: Map values Go decodes with a parser of its own: its error fails the request as it is.
_PARSERS: dict[str, Callable[[str], str | None]] = {
    "resource.Quantity": go_parse_error,
    "[]uint8": gobase64.error,
}


def _compiled(name: str) -> _Node:
    """A definition compiled once; references resolve to the same (possibly cyclic) nodes."""
    node = _COMPILED.get(name)
    if node is None:
        raw = _document()["definitions"][name]
        node = _COMPILED[name] = _Node()
        node.types, node.go = frozenset({dict}), str(raw.get("go", ""))
        node.struct = node.go.removeprefix("v1.")
        node.props = {key: _compile(sub) for key, sub in raw.get("p", {}).items()}
        if name == RAW_EXTENSION:
            # Free-form JSON (a DRA driver's opaque parameters): kept whole, as kube keeps it.
            node.props, node.leaf = None, True
    return node


def _compile(raw: Node) -> _Node:
    if "ref" in raw:
        return _compiled(str(raw["ref"]))
    node = _Node()
    node.types = frozenset(t for kind in raw.get("t", ()) for t in _PY_TYPES.get(kind, ()))
    node.go = str(raw.get("go", ""))
    node.bounds = _INT_BOUNDS.get(node.go)
    node.any = bool(raw.get("any"))
    if isinstance(raw.get("i"), Mapping):
        node.items = _compile(raw["i"])
    if isinstance(raw.get("a"), Mapping):
        node.values = _compile(raw["a"])
    node.leaf = node.items is None and node.values is None
    return node


def _walk_object(value: dict[str, Any], node: _Node, path: str, go_path: str, out: Decoded) -> None:
    props = node.props or {}
    dropped: list[str] = []
    for key, item in value.items():
        sub = props.get(key)
        if sub is None:
            dropped.append(key)
            continue
        if item is None:
            continue
        if sub.leaf:
            # Most fields are scalars: checked here, without a call.
            if type(item) in sub.types and (
                sub.bounds is None or sub.bounds[0] <= item <= sub.bounds[1]
            ):
                continue
            _fail(out, item, f"{go_path}.{key}" if go_path else key, node.struct, sub.go)
            return
        _walk_value(item, sub, path, go_path, key, node.struct, out)
        if out.type_error is not None:
            return
    for key in dropped:
        out.unknown.append(f"{path}.{key}" if path else key)
        del value[key]


def _walk_value(
    item: Any, sub: _Node, path: str, go_path: str, key: str, struct: str, out: Decoded
) -> None:
    kind = type(item)
    here_go = f"{go_path}.{key}" if go_path else key
    if kind not in sub.types:
        _fail(out, item, here_go, struct, sub.go)
        return
    if sub.bounds is not None and not sub.bounds[0] <= item <= sub.bounds[1]:
        _fail(out, item, here_go, struct, sub.go)
        return
    if kind is dict:
        if sub.props is not None:
            _walk_object(item, sub, f"{path}.{key}" if path else key, here_go, out)
        elif sub.values is not None and sub.values.props is not None:
            here = f"{path}.{key}" if path else key
            for name, value in item.items():
                if value is not None:
                    _walk_value(value, sub.values, here, here_go, name, struct, out)
        elif sub.values is not None:
            allowed = sub.values.types
            parse = _PARSERS.get(sub.values.go)
            for value in item.values():
                if value is not None and type(value) not in allowed:
                    _fail(out, value, here_go, struct, sub.values.go)
                    return
                if parse is not None and type(value) is str:
                    out.type_error = parse(value)
                    if out.type_error is not None:
                        return
    elif kind is list and sub.items is not None:
        here = f"{path}.{key}" if path else key
        element = sub.items
        for i, value in enumerate(item):
            if value is None:
                continue
            if element.props is not None and type(value) is dict:
                _walk_object(value, element, f"{here}[{i}]", here_go, out)
            elif type(value) not in element.types:
                _fail(out, value, here_go, struct, element.go)
            elif element.items is not None or element.values is not None:
                _walk_value(value, element, here, go_path, key, struct, out)
            if out.type_error is not None:
                return


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _fail(out: Decoded, value: Any, go_path: str, struct: str, go: str) -> None:
    shown = _json_kind(value)
    if shown == "number" and go in _INT_BOUNDS:
        shown = f"number {json.dumps(value)}"
    out.type_error = (
        f"json: cannot unmarshal {shown} into Go struct field {struct}.{go_path} of type {go}"
    )
