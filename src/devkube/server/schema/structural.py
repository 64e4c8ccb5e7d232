"""Structural schemas applied as kube-apiserver applies a CRD's ``openAPIV3Schema``.

One walk over the object does what the real server does in three places: the decoder prunes
fields the schema does not declare (and remembers their paths, which ``fieldValidation``
turns into an error or a warning), drops nulls a field does not allow and fills defaults
(a default object is itself defaulted), then the strategy validates what is left. Error
messages are worded as kube-openapi words them and converted to field errors as
apiextensions-apiserver converts them, so a client prints exactly what a real cluster prints:

    spec.x: Invalid value: "string": spec.x in body must be of type integer: "string"

CEL rules (``x-kubernetes-validations``) run after this walk, in ``cel.rules``. Not
implemented: ``uniqueItems``/``multipleOf``, list-type/map-type uniqueness,
``oneOf``/``allOf``/``not`` value validation, string formats other than the numeric ones.
``anyOf`` is honoured only as the int-or-string idiom.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

#: Kept at an object's root (and an embedded resource's): the server handles them itself.
ROOT_KEEP = ("apiVersion", "kind", "metadata")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)

#: (field path, message, cause reason) as a Status cause carries them.
Cause = tuple[str, str, str]

STRICT, WARN, IGNORE = "Strict", "Warn", "Ignore"


@dataclass
class FieldValidation:
    """A request's ``fieldValidation`` and the warnings its write collected.

    Without the parameter the real server warns (the default since Kubernetes 1.27).
    """

    mode: str = WARN
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, value: str | None) -> FieldValidation:
        if value in (None, ""):
            return cls()
        if value not in (STRICT, WARN, IGNORE):
            raise ValueError(
                f"fieldValidation parameter unsupported: {value}. Supported values are: "
                f"{IGNORE}, {WARN}, {STRICT}"
            )
        return cls(str(value))


@dataclass
class Shaped:
    """An object after pruning, defaulting and validation against a structural schema."""

    obj: Any
    #: Paths of the fields pruned because the schema does not declare them.
    unknown: list[str] = field(default_factory=list)
    causes: list[Cause] = field(default_factory=list)


def apply(
    obj: Any, schema: Mapping[str, Any] | None, *, validate: bool = True, at: str = ""
) -> Shaped:
    """Prune, default and (unless ``validate`` is false) validate a deep copy of ``obj``
    (``at``: the field path of ``obj`` itself, for messages)."""
    if not schema:
        return Shaped(obj)
    out = Shaped(None)
    out.obj = _walk(copy.deepcopy(obj), schema, at, out, root=not at, validate=validate)
    return out


def prune(obj: Any, schema: Mapping[str, Any] | None) -> Any:
    """``obj`` as the server would store it: pruned and defaulted, never refused."""
    return apply(obj, schema, validate=False).obj


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
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


def _quote(value: Any) -> str:
    """A bad value as Go's field errors print it: strings quoted, scalars plain."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number(value)
    if value is None:
        return '"null"'
    return json.dumps(value, separators=(",", ":"))


def _number(value: float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _invalid(out: Shaped, path: str, value: Any, message: str) -> None:
    out.causes.append((path, f"Invalid value: {_quote(value)}: {message}", "FieldValueInvalid"))


def _type_ok(value: Any, wanted: str) -> bool:
    actual = _type_name(value)
    if actual == wanted:
        return True
    if wanted == "number" and actual == "integer":
        return True
    return wanted == "integer" and isinstance(value, float) and value.is_integer()


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _int_or_string(schema: Mapping[str, Any]) -> bool:
    return bool(schema.get("x-kubernetes-int-or-string"))


def _walk(
    value: Any,
    schema: Mapping[str, Any],
    path: str,
    out: Shaped,
    *,
    root: bool = False,
    validate: bool = True,
) -> Any:
    wanted = schema.get("type")
    if validate:
        if value is None:
            if not schema.get("nullable") and (wanted or _int_or_string(schema)):
                expected = "integer,string" if _int_or_string(schema) else wanted
                out.causes.append(
                    (
                        path,
                        f'Invalid value: "null": {path} in body must be of type {expected}: "null"',
                        "FieldValueTypeInvalid",
                    )
                )
            return value
        if _int_or_string(schema):
            if not isinstance(value, int | str) or isinstance(value, bool):
                actual = _type_name(value)
                out.causes.append(
                    (
                        path,
                        f'Invalid value: "{actual}": {path} in body must be of type '
                        f'integer,string: "{actual}"',
                        "FieldValueTypeInvalid",
                    )
                )
                return value
        elif isinstance(wanted, str) and not _type_ok(value, wanted):
            actual = _type_name(value)
            out.causes.append(
                (
                    path,
                    f'Invalid value: "{actual}": {path} in body must be of type {wanted}: '
                    f'"{actual}"',
                    "FieldValueTypeInvalid",
                )
            )
            return value
    if isinstance(value, dict):
        _object(value, schema, path, out, root=root, validate=validate)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                value[i] = _walk(item, items, f"{path}[{i}]", out, validate=validate)
        if validate:
            _array_bounds(value, schema, path, out)
    elif validate and value is not None:
        _scalar(value, schema, path, out)
    return value


def _object(
    value: dict[str, Any],
    schema: Mapping[str, Any],
    path: str,
    out: Shaped,
    *,
    root: bool,
    validate: bool,
) -> None:
    props: Mapping[str, Any] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    keep_meta = root or bool(schema.get("x-kubernetes-embedded-resource"))
    prefix = f"{path}." if path else ""
    for key in list(value):
        here = prefix + key
        sub = props.get(key)
        if keep_meta and key == "metadata":
            continue  # ObjectMeta is the server's own, whatever the schema says of it
        if sub is not None:
            if value[key] is None and not sub.get("nullable"):
                # Nulls a field does not allow are dropped before defaulting, as the real
                # decoder does; a default then fills the gap.
                del value[key]
                continue
            value[key] = _walk(value[key], sub, here, out, validate=validate)
        elif keep_meta and key in ROOT_KEEP:
            continue
        elif isinstance(additional, Mapping):
            value[key] = _walk(value[key], additional, here, out, validate=validate)
        elif additional is True or preserve:
            continue
        else:
            out.unknown.append(here)
            del value[key]
    for key, sub in props.items():
        if key not in value and "default" in sub:
            # The default is part of the schema, so it is shaped, never validated against it.
            value[key] = _walk(
                copy.deepcopy(sub["default"]), sub, prefix + key, Shaped(None), validate=False
            )
    if validate:
        for key in schema.get("required") or ():
            if key not in value:
                out.causes.append((prefix + key, "Required value", "FieldValueRequired"))
        if keep_meta and schema.get("x-kubernetes-embedded-resource"):
            for key in ("apiVersion", "kind"):
                if not value.get(key):
                    out.causes.append(
                        (prefix + key, "Required value: must not be empty", "FieldValueRequired")
                    )
        count = len(value)
        low, high = schema.get("minProperties"), schema.get("maxProperties")
        if isinstance(high, int) and count > high:
            out.causes.append(
                (path, f"Too many: {count}: must have at most {high} items", "FieldValueTooMany")
            )
        if isinstance(low, int) and count < low:
            _invalid(out, path, count, f"{path} in body should have at least {low} properties")


def _array_bounds(value: list[Any], schema: Mapping[str, Any], path: str, out: Shaped) -> None:
    size = len(value)
    high, low = schema.get("maxItems"), schema.get("minItems")
    if isinstance(high, int) and size > high:
        out.causes.append(
            (path, f"Too many: {size}: must have at most {high} items", "FieldValueTooMany")
        )
    if isinstance(low, int) and size < low:
        _invalid(out, path, size, f"{path} in body should have at least {low} items")


def _scalar(value: Any, schema: Mapping[str, Any], path: str, out: Shaped) -> None:
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        shown = ", ".join(json.dumps(v) for v in enum)
        out.causes.append(
            (
                path,
                f"Unsupported value: {_quote(value)}: supported values: {shown}",
                "FieldValueNotSupported",
            )
        )
    if isinstance(value, str):
        _string(value, schema, path, out)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _numeric(value, schema, path, out)


def _string(value: str, schema: Mapping[str, Any], path: str, out: Shaped) -> None:
    high, low = schema.get("maxLength"), schema.get("minLength")
    if isinstance(high, int) and len(value) > high:
        out.causes.append(
            (path, f"Too long: may not be more than {high} bytes", "FieldValueTooLong")
        )
    if isinstance(low, int) and len(value) < low:
        _invalid(out, path, value, f"{path} in body should be at least {low} chars long")
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and not _regex(pattern).search(value):
        _invalid(out, path, value, f"{path} in body should match '{pattern}'")


def _numeric(value: float, schema: Mapping[str, Any], path: str, out: Shaped) -> None:
    wanted, fmt = schema.get("type"), schema.get("format")
    bounds = {"int32": _INT32, "int64": _INT64}.get(str(fmt))
    if wanted == "integer" and bounds and not bounds[0] <= value <= bounds[1]:
        # kube-openapi reports a range error as a bare error, which apiextensions turns into
        # an Invalid cause on the root path (Go prints a nil path as "<nil>").
        out.causes.append(
            (
                "<nil>",
                f'Invalid value: "": Checked value must be of type integer with format {fmt} '
                f"in {path}",
                "FieldValueInvalid",
            )
        )
    high, low = schema.get("maximum"), schema.get("minimum")
    if isinstance(high, int | float):
        if schema.get("exclusiveMaximum") and value >= high:
            _invalid(out, path, value, f"{path} in body should be less than {_number(high)}")
        elif value > high:
            _invalid(
                out,
                path,
                value,
                f"{path} in body should be less than or equal to {_number(high)}",
            )
    if isinstance(low, int | float):
        if schema.get("exclusiveMinimum") and value <= low:
            _invalid(out, path, value, f"{path} in body should be greater than {_number(low)}")
        elif value < low:
            _invalid(
                out,
                path,
                value,
                f"{path} in body should be greater than or equal to {_number(low)}",
            )


def schema_problems(schema: Mapping[str, Any], path: str) -> list[Cause]:
    """What apiextensions-apiserver refuses in a CRD's own schema: a node without a type
    (unless int-or-string or preserving unknown fields) and a default its node rejects."""
    found: list[Cause] = []
    _check_schema(schema, path, found, root=True)
    return found


def _check_schema(node: Mapping[str, Any], path: str, found: list[Cause], *, root: bool) -> None:
    if (
        not root
        and "type" not in node
        and not node.get("x-kubernetes-int-or-string")
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        found.append(
            (
                f"{path}.type",
                "Required value: must not be empty for specified object fields",
                "FieldValueRequired",
            )
        )
    if "default" in node:
        where = f"{path}.default"
        for field_path, message, reason in apply(node["default"], node, at=where).causes:
            found.append((field_path, message, reason))
    for key, sub in (node.get("properties") or {}).items():
        if isinstance(sub, Mapping):
            _check_schema(sub, f"{path}.properties[{key}]", found, root=False)
    items = node.get("items")
    if isinstance(items, Mapping):
        _check_schema(items, f"{path}.items", found, root=False)
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        _check_schema(extra, f"{path}.additionalProperties", found, root=False)
