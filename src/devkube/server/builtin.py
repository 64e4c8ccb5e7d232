"""Built-in kinds decoded as kube-apiserver's Go decoder decodes them.

The real server turns a request body into a Go struct: a field the struct lacks is dropped
(and, under ``fieldValidation=Strict``, refused; under ``Warn``, reported in a ``Warning``
header), and a value of the wrong JSON type fails the whole request with Go's own message:

    Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go
    struct field ContainerPort.spec.containers.ports.containerPort of type int32

The types come from ``builtin_schemas.json``, generated from Kubernetes' OpenAPI by
``deploy/k8s_schemas.py``. Semantic rules (names, required fields, ports) stay in
``validation.py``; defaults in ``defaults.py``. Quantities, IntOrString and times only get their
JSON kind checked (their Go decoders are custom).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

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
    text = resources.files("devkube.server").joinpath("builtin_schemas.json").read_text()
    doc: dict[str, Any] = json.loads(text)
    return doc


def has_schema(api_version: str, kind: str) -> bool:
    return f"{api_version}/{kind}" in _document()["kinds"]


def decode(obj: dict[str, Any], api_version: str, kind: str) -> Decoded:
    """Drop (in place) and list the fields ``kind`` does not have; find the first type error."""
    doc = _document()
    name = doc["kinds"].get(f"{api_version}/{kind}")
    out = Decoded(obj)
    if name is None:
        return out
    _Walker(doc["definitions"], out).object(obj, doc["definitions"][name], "", "")
    return out


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _go_kind(value: Any) -> str:
    """How Go's UnmarshalTypeError names the JSON value."""
    kind = _json_kind(value)
    if kind in ("integer", "number"):
        return "number"
    return {"boolean": "bool"}.get(kind, kind)


class _Walker:
    def __init__(self, definitions: Mapping[str, Node], out: Decoded) -> None:
        self.defs = definitions
        self.out = out

    def object(self, value: dict[str, Any], node: Node, path: str, go_path: str) -> None:
        props: Mapping[str, Node] = node.get("p") or {}
        struct = str(node.get("go", "")).removeprefix("v1.")
        for key in list(value):
            here = f"{path}.{key}" if path else key
            go_here = f"{go_path}.{key}" if go_path else key
            sub = props.get(key)
            if sub is None:
                self.out.unknown.append(here)
                del value[key]
                continue
            self.value(value[key], sub, here, go_here, struct)

    def value(self, value: Any, node: Node, path: str, go_path: str, struct: str) -> None:
        if value is None or self.out.type_error is not None:
            return
        if "ref" in node:
            target = self.defs[node["ref"]]
            if not isinstance(value, dict):
                self._fail(value, go_path, struct, str(target.get("go")))
                return
            self.object(value, target, path, go_path)
            return
        kinds = node.get("t") or []
        actual = _json_kind(value)
        go = str(node.get("go", ""))
        ok = actual in kinds or (actual == "integer" and "number" in kinds)
        if not ok or (go in _INT_BOUNDS and not _INT_BOUNDS[go][0] <= value <= _INT_BOUNDS[go][1]):
            self._fail(value, go_path, struct, go)
            return
        if isinstance(value, list) and isinstance(node.get("i"), Mapping):
            for i, item in enumerate(value):
                self.value(item, node["i"], f"{path}[{i}]", go_path, struct)
        elif isinstance(value, dict) and isinstance(node.get("a"), Mapping):
            for key, item in value.items():
                self.value(item, node["a"], f"{path}.{key}", go_path, struct)

    def _fail(self, value: Any, go_path: str, struct: str, go: str) -> None:
        shown = _go_kind(value)
        if shown == "number" and go in _INT_BOUNDS:
            shown = f"number {json.dumps(value)}"
        self.out.type_error = (
            f"json: cannot unmarshal {shown} into Go struct field {struct}.{go_path} of type {go}"
        )
