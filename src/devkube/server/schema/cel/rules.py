"""CEL validation rules (``x-kubernetes-validations``) as kube-apiserver runs them on CRDs.

The expressions run on Google's C++ CEL runtime (``cel-expr-python``, the same language and
standard library as cel-go's, with its strings, optional and bindings extensions). Rules are
compiled once per schema (``validator``, cached on the schema object, which stays the same
until the CRD is written again) into a tree that holds only the schema nodes on the way to a
rule, so an object whose rules sit on two scalars costs two lookups, not a walk of the object.

Kept from kube-apiserver (``apiextensions-apiserver/pkg/apiserver/schema/cel``):
- ``self`` is the value at the rule's node; a null or absent value is not validated;
- transition rules (a rule that names ``oldSelf``) run only on update and only where the old
  value exists (object properties and map values by key, list-type=map items by their keys);
  with ``optionalOldSelf`` they always run and ``oldSelf`` is an optional;
- ratcheting: on update a non-transition rule's failure on a value equal to the old one is
  not an error;
- the message: ``messageExpression`` (evaluated without optionalOldSelf, as kube does; an
  empty, multi-line or failed result falls back), then ``message``, then
  ``failed rule: <rule>``; ``reason`` picks the field error's kind and ``fieldPath`` is
  appended to the node's path; the invalid value printed is the node's schema type;
- a rule that does not compile, or does not yield a bool, refuses the CRD with kube's text.

Kubernetes' libraries for CRD rules are there: quantity (``quantity``), lists and sets
(``lists``), ip, cidr and url (``network``), format and regex (``formats``).
A rule calling anything else (``semver``, ``authz``, a misspelt function) does not compile and
refuses the CRD with the compiler's ``undeclared reference``, as kube-apiserver does. Not
enforced: the cost budget and cost estimates. Object fields are typed as maps, so a misspelt
field is an evaluation error, not a compile error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from cel_expr_python import cel  # type: ignore[import-untyped]
from cel_expr_python.ext import (  # type: ignore[import-untyped]
    ext_bindings,
    ext_math,
    ext_optional,
    ext_strings,
)

from devkube.server.schema.cel.formats import formats_library
from devkube.server.schema.cel.lists import collections_library
from devkube.server.schema.cel.network import network_library
from devkube.server.schema.cel.quantity import quantity_library

#: (field path, message, cause reason) as a Status cause carries them.
Cause = tuple[str, str, str]

_OLD_SELF = re.compile(r"\boldSelf\b")
_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
#: The optional oldSelf of ``optionalOldSelf`` (the Python binding cannot pass an optional):
#: the rule goes on its own line so that compile errors point into it.
_OPTIONAL_WRAP = "cel.bind(oldSelf, __hasOld ? optional.of(__old) : optional.none(),\n{}\n)"
_ERROR = cel.Type.ERROR
_REASONS = {
    "FieldValueForbidden": ("Forbidden", "FieldValueForbidden"),
    "FieldValueRequired": ("Required value", "FieldValueRequired"),
    "FieldValueDuplicate": ("Duplicate value", "FieldValueDuplicate"),
}


@dataclass(frozen=True)
class Rule:
    source: Mapping[str, Any]
    program: Any
    message_program: Any
    transition: bool
    optional_old: bool
    field_path: str


@dataclass
class Node:
    """A schema node with rules, or on the way to one."""

    type: str
    type_key: str = "dyn"
    rules: list[Rule] = field(default_factory=list)
    properties: dict[str, Node] = field(default_factory=dict)
    items: Node | None = None
    values: Node | None = None
    list_keys: tuple[str, ...] = ()
    #: A rule here has optionalOldSelf: the old value is bound even on create.
    optional_old: bool = False


@dataclass
class Compiled:
    root: Node | None
    #: Compile errors, as causes of the CRD's refusal.
    errors: list[Cause]


def _type_key(schema: Mapping[str, Any]) -> str:
    """The CEL type ``self`` has at a schema node (int-or-string and free-form nodes: dyn)."""
    if schema.get("x-kubernetes-int-or-string") or schema.get(
        "x-kubernetes-preserve-unknown-fields"
    ):
        return "dyn"
    return str(schema.get("type") or "dyn")


def _cel_type(key: str) -> Any:
    return {
        "string": cel.Type.STRING,
        "integer": cel.Type.INT,
        "number": cel.Type.DOUBLE,
        "boolean": cel.Type.BOOL,
        "array": cel.Type.List(cel.Type.DYN),
        "object": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
    }.get(key, cel.Type.DYN)


@cache
def _env(key: str) -> Any:
    typed = _cel_type(key)
    return cel.NewEnv(
        variables={"self": typed, "oldSelf": typed, "__old": typed, "__hasOld": cel.Type.BOOL},
        extensions=[
            ext_strings.ExtStrings(),
            ext_optional.ExtOptional(),
            ext_bindings.ExtBindings(),
            ext_math.ExtMath(),
            quantity_library(),
            collections_library(),
            network_library(),
            formats_library(),
        ],
    )


def _compile_error(message: str) -> str:
    text = message.removeprefix("INVALID_ARGUMENT: ").removesuffix(" [INVALID_ARGUMENT]")
    return text.replace("<input>:2:", "<input>:1:")


def _go_rule(rule: Mapping[str, Any]) -> str:
    """The rule as Go's ``%#v`` prints an ``apiextensions.ValidationRule``."""

    def q(key: str) -> str:
        return '"' + str(rule.get(key, "")).replace("\\", "\\\\").replace('"', '\\"') + '"'

    reason = "(*apiextensions.FieldValueErrorReason)(nil)"
    if rule.get("reason"):
        reason = "(*apiextensions.FieldValueErrorReason)(0x0)"
    optional = "(*bool)(nil)" if rule.get("optionalOldSelf") is None else "(*bool)(0x0)"
    return (
        f"apiextensions.ValidationRule{{Rule:{q('rule')}, Message:{q('message')}, "
        f"MessageExpression:{q('messageExpression')}, Reason:{reason}, "
        f"FieldPath:{q('fieldPath')}, OptionalOldSelf:{optional}}}"
    )


def _compile_rule(rule: Mapping[str, Any], env: Any, path: str, errors: list[Cause]) -> Rule | None:
    text = str(rule.get("rule") or "")
    where = f"{path}.rule"
    if not text.strip():
        errors.append((where, "Required value", "FieldValueRequired"))
        return None
    optional_old = bool(rule.get("optionalOldSelf"))
    try:
        program = env.compile(_OPTIONAL_WRAP.format(text) if optional_old else text)
    except RuntimeError as exc:
        detail = f"compilation failed: {_compile_error(str(exc))}"
        errors.append((where, f"Invalid value: {_go_rule(rule)}: {detail}", "FieldValueInvalid"))
        return None
    if program.return_type() not in (cel.Type.BOOL, cel.Type.DYN):
        detail = "cel expression must evaluate to a bool"
        errors.append((where, f"Invalid value: {_go_rule(rule)}: {detail}", "FieldValueInvalid"))
        return None
    message_program = None
    if rule.get("messageExpression"):
        try:
            message_program = env.compile(str(rule["messageExpression"]))
        except RuntimeError as exc:
            errors.append(
                (
                    f"{path}.messageExpression",
                    f"Invalid value: {_go_rule(rule)}: messageExpression compilation failed: "
                    f"{_compile_error(str(exc))}",
                    "FieldValueInvalid",
                )
            )
            return None
    transition = bool(_OLD_SELF.search(_STRING_LITERAL.sub("''", text)))
    return Rule(
        rule, program, message_program, transition, optional_old, str(rule.get("fieldPath") or "")
    )


def _build(schema: Mapping[str, Any], path: str, errors: list[Cause]) -> Node | None:
    node = Node(type=str(schema.get("type") or "object"), type_key=_type_key(schema))
    rules = schema.get("x-kubernetes-validations") or []
    if rules:
        env = _env(node.type_key)
        for i, rule in enumerate(rules):
            compiled = _compile_rule(rule, env, f"{path}.x-kubernetes-validations[{i}]", errors)
            if compiled is not None:
                node.rules.append(compiled)
                node.optional_old |= compiled.optional_old
    for key, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, Mapping) and (child := _build(sub, f"{path}.properties[{key}]", errors)):
            node.properties[key] = child
    items = schema.get("items")
    if isinstance(items, Mapping):
        node.items = _build(items, f"{path}.items", errors)
        if schema.get("x-kubernetes-list-type") == "map":
            node.list_keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        node.values = _build(extra, f"{path}.additionalProperties", errors)
    if node.rules or node.properties or node.items or node.values:
        return node
    return None


_CACHE: dict[int, tuple[Mapping[str, Any], Compiled]] = {}


def validator(schema: Mapping[str, Any], path: str = "spec.validation.openAPIV3Schema") -> Compiled:
    """The compiled rules of a CRD version's schema, compiled once per schema object."""
    hit = _CACHE.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    errors: list[Cause] = []
    compiled = Compiled(_build(schema, path, errors), errors)
    if len(_CACHE) > 256:
        _CACHE.clear()
    _CACHE[id(schema)] = (schema, compiled)
    return compiled


def crd_problems(crd: Mapping[str, Any]) -> list[Cause]:
    """Rules of a CRD that do not compile, at the paths kube-apiserver names them (one
    version's schema is reported under ``spec.validation``, as the internal API holds it)."""
    versions = (crd.get("spec") or {}).get("versions") or []
    found: list[Cause] = []
    for i, version in enumerate(versions):
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if isinstance(schema, Mapping):
            where = (
                "spec.validation.openAPIV3Schema"
                if len(versions) == 1
                else f"spec.versions[{i}].schema.openAPIV3Schema"
            )
            found += _compile_uncached(schema, where)
    return found


def _compile_uncached(schema: Mapping[str, Any], path: str) -> list[Cause]:
    errors: list[Cause] = []
    _build(schema, path, errors)
    return errors


def validate(schema: Mapping[str, Any] | None, obj: Any, old: Any) -> list[Cause]:
    """The rule failures of ``obj`` (``old``: the stored object on update, else None)."""
    if not schema:
        return []
    root = validator(schema).root
    if root is None:
        return []
    found: list[Cause] = []
    _walk(root, obj, old, old is not None, "", found)
    return found


def _child_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk(node: Node, value: Any, old: Any, has_old: bool, path: str, found: list[Cause]) -> None:
    if value is None:
        return
    if not has_old:
        old = None
    if node.rules:
        _run(node, value, old, has_old, path, found)
    if isinstance(value, dict):
        olds = old if isinstance(old, dict) else {}
        for key, child in node.properties.items():
            if key in value:
                _walk(child, value[key], olds.get(key), key in olds, _child_path(path, key), found)
        if node.values is not None:
            for key, sub in value.items():
                _walk(node.values, sub, olds.get(key), key in olds, f"{path}[{key}]", found)
    elif isinstance(value, list) and node.items is not None:
        matched = _old_items(node, old) if isinstance(old, list) else {}
        for i, item in enumerate(value):
            prior = matched.get(_item_key(node, item)) if node.list_keys else None
            _walk(node.items, item, prior, prior is not None, f"{path}[{i}]", found)


def _item_key(node: Node, item: Any) -> Any:
    if not isinstance(item, dict):
        return None
    return tuple(repr(item.get(k)) for k in node.list_keys)


def _old_items(node: Node, old: list[Any]) -> dict[Any, Any]:
    if not node.list_keys:
        return {}
    return {_item_key(node, item): item for item in old}


def _run(node: Node, value: Any, old: Any, has_old: bool, path: str, found: list[Cause]) -> None:
    unchanged = has_old and value == old
    data = {"self": value}
    if has_old or node.optional_old:  # the old value only when a rule can read it
        data |= {"oldSelf": old, "__old": old, "__hasOld": has_old}
    activation = None  # built once per node, for the rules that run
    for rule in node.rules:
        if rule.transition and not has_old and not rule.optional_old:
            continue
        if activation is None:
            activation = _env(node.type_key).Activation(data)
        result = rule.program.eval(activation)
        if result.value() is True:  # the common case first: no type() call
            continue
        if result.type() == _ERROR:
            detail = f"{_eval_error(result)} evaluating rule: {_rule_error_string(rule.source)}"
            found.append((path, f'Invalid value: "{node.type}": {detail}', "FieldValueInvalid"))
            continue
        if unchanged and not rule.transition:
            continue
        where = path
        if rule.field_path:
            relative = rule.field_path.lstrip(".")
            where = f"{path}.{relative}" if path else relative
        detail, from_expression = _message(rule, data)
        shown = _OMITTED if from_expression else value
        found.append(_field_error(where, node.type, shown, detail, rule.source))


def _eval_error(result: Any) -> str:
    text = str(result.value())
    found = re.match(r'NOT_FOUND: Key not found in map : "(.*)"$', text)
    if found:
        return f"no such key: {found.group(1)}"
    return re.sub(r"^[A-Z_]+: ", "", text)


def _rule_error_string(rule: Mapping[str, Any]) -> str:
    if rule.get("message"):
        return str(rule["message"]).strip()
    return str(rule.get("rule") or "").strip()


def _message(rule: Rule, data: dict[str, Any]) -> tuple[str, bool]:
    """The failure's message, and whether a messageExpression wrote it."""
    if rule.message_program is not None:
        # ``oldSelf`` here is the plain old value (never the optional), as kube binds it.
        result = rule.message_program.eval(data=data)
        if result.type() == cel.Type.STRING:
            text = str(result.value()).strip()
            if text and "\n" not in text and len(text) <= 5 * 1024:
                return text, True
    if rule.source.get("message"):
        return str(rule.source["message"]).strip(), False
    return f"failed rule: {_rule_error_string(rule.source)}", False


#: What kube v1.37 shows of the value a rule refused (docs/design.md §8, "CEL"): a scalar as
#: Go's field errors print it, nothing for an object or a list ("avoid outputting complex
#: structured field values"), and nothing when a messageExpression wrote the message (it is
#: expected to embed the value itself).
_OMITTED = object()


def _go_value(value: Any) -> str:
    """A scalar as Go's field errors print it: strings quoted, numbers and booleans plain."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value)


def _invalid_value(value: Any) -> str:
    if value is _OMITTED or isinstance(value, dict | list):
        return "Invalid value: "
    return f"Invalid value: {_go_value(value)}: "


def _field_error(
    path: str, type_name: str, value: Any, detail: str, rule: Mapping[str, Any]
) -> Cause:
    kind = _REASONS.get(str(rule.get("reason") or ""))
    if kind is None:
        return (path, f"{_invalid_value(value)}{detail}", "FieldValueInvalid")
    if kind[1] == "FieldValueDuplicate":
        return (path, f'Duplicate value: "{type_name}"', kind[1])
    return (path, f"{kind[0]}: {detail}", kind[1])
