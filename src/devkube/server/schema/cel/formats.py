"""Kubernetes' CEL ``format`` and ``regex`` libraries (``k8s.io/apiserver/pkg/cel/library``)
for the dev cluster's CEL rules (docs/design.md §8, "CEL rules"), with apimachinery's words.

``format.dns1123Label()`` and the others are a CEL map naming the format; ``validate`` gives
the list of apimachinery's messages, empty when the string is valid. Kube types ``validate``
and ``format.named`` as optionals, which cel-expr-python cannot hand back from Python: here
``hasValue()`` and ``value()`` are also members of those two results, so rules written for
kube read and answer the same; a rule that uses the result as a plain list compiles here and
not on kube, and ``orValue()`` on them does not compile here (the runtime will not take a
second ``orValue`` beside the optional one). Regexes are Python's, which agree with RE2 on
the syntax such rules use (RE2 has no backreferences or lookaround; Python accepts them).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from cel_expr_python import cel  # type: ignore[import-untyped]

from devkube.server.schema.cel.network import parse_url

_T = cel.Type
FORMAT = _T.Map(_T.INT, _T.BOOL)
ERRORS = _T.List(_T.STRING)

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(\.{_LABEL})*"
_LABEL_1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = f"({_QUALIFIED})?"
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def regex_error(message: str, pattern: str, *examples: str) -> str:
    """apimachinery's ``RegexError`` (its double space after a comma included)."""
    if not examples:
        return f"{message} (regex used for validation is '{pattern}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def _full(pattern: str, text: str) -> bool:
    return re.fullmatch(pattern, text) is not None


def dns1123_label(text: str) -> list[str]:
    errors = ["must be no more than 63 characters"] if len(text) > 63 else []
    if not _full(_LABEL, text):
        message = (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character"
        )
        errors.append(regex_error(message, _LABEL, "my-name", "123-abc"))
    return errors


def dns1123_subdomain(text: str) -> list[str]:
    errors = ["must be no more than 253 characters"] if len(text) > 253 else []
    if not _full(_SUBDOMAIN, text):
        message = (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character"
        )
        errors.append(regex_error(message, _SUBDOMAIN, "example.com"))
    return errors


def dns1035_label(text: str) -> list[str]:
    errors = ["must be no more than 63 characters"] if len(text) > 63 else []
    if not _full(_LABEL_1035, text):
        message = (
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
            "with an alphabetic character, and end with an alphanumeric character"
        )
        errors.append(regex_error(message, _LABEL_1035, "my-name", "abc-123"))
    return errors


def _mask_trailing_dash(text: str) -> str:
    """apimachinery's ``maskTrailingDash``, its off-by-one kept: "ab-" is checked as "aa"."""
    if len(text) > 1 and text.endswith("-"):
        return text[:-2] + "a"
    return text


def qualified_name(text: str) -> list[str]:
    parts = text.split("/")
    message = (
        "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
        "with an alphanumeric character"
    )
    errors: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += [f"prefix part {m}" for m in dns1123_subdomain(prefix)]
    else:
        shown = regex_error(
            "a qualified name " + message, _QUALIFIED, "MyName", "my.name", "123-abc"
        )
        return [
            f"{shown} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if name and not _full(_QUALIFIED, name):
        errors.append(
            regex_error("name part " + message, _QUALIFIED, "MyName", "my.name", "123-abc")
        )
    return errors


def label_value(text: str) -> list[str]:
    errors = ["must be no more than 63 characters"] if len(text) > 63 else []
    if not _full(_LABEL_VALUE, text):
        message = (
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character"
        )
        errors.append(regex_error(message, _LABEL_VALUE, "MyValue", "my_value", "12345"))
    return errors


def _uri(text: str) -> list[str]:
    try:
        parse_url(text)
    except ValueError:
        return [f'parse "{text}": invalid URI for request']
    return []


def _byte(text: str) -> list[str]:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _date(text: str) -> list[str]:
    try:
        date.fromisoformat(text)
    except ValueError:
        return ["invalid date"]
    return [] if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text) else ["invalid date"]


def _datetime(text: str) -> list[str]:
    if not _DATETIME.match(text):
        return ["invalid datetime"]
    try:
        datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return ["invalid datetime"]
    return []


#: The formats kube's library names, in its words.
FORMATS: dict[str, Callable[[str], list[str]]] = {
    "dns1123Label": dns1123_label,
    "dns1123Subdomain": dns1123_subdomain,
    "dns1035Label": dns1035_label,
    "qualifiedName": qualified_name,
    "dns1123LabelPrefix": lambda t: dns1123_label(_mask_trailing_dash(t)),
    "dns1123SubdomainPrefix": lambda t: dns1123_subdomain(_mask_trailing_dash(t)),
    "dns1035LabelPrefix": lambda t: dns1035_label(_mask_trailing_dash(t)),
    "labelValue": label_value,
    "uri": _uri,
    "uuid": lambda t: [] if _UUID.match(t) else ["does not match the UUID format"],
    "byte": _byte,
    "date": _date,
    "datetime": _datetime,
}
_NAMES = list(FORMATS)


def _validate(fmt: Any, text: str) -> list[str]:
    (index,) = fmt
    return FORMATS[_NAMES[index]](text)


def _named(name: str) -> dict[int, bool]:
    return {_NAMES.index(name): True} if name in FORMATS else {}


def _none() -> ValueError:
    return ValueError("optional.none() dereference")


def _value(found: Any) -> Any:
    if not found:
        raise _none()
    return found


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as error:
        raise ValueError(f"Illegal regex: {error}") from None


def _find(text: str, pattern: str) -> str:
    found = _compile(pattern).search(text)
    return found.group(0) if found else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = [m.group(0) for m in _compile(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


def _member(ident: str, result: Any, params: list[Any], impl: Any) -> Any:
    return cel.Overload(ident, result, params, is_member=True, impl=impl)


def formats_library() -> Any:
    """format.<name>(), format.named(), validate() and their optional-like members; find and
    findAll."""
    s = _T.STRING
    constants = [
        cel.FunctionDecl(
            f"format.{name}",
            [cel.Overload(f"format_{name}", FORMAT, [], impl=lambda i=i: {i: True})],
        )
        for i, name in enumerate(_NAMES)
    ]
    decls = [
        *constants,
        cel.FunctionDecl("format.named", [cel.Overload("format_named", FORMAT, [s], impl=_named)]),
        cel.FunctionDecl("validate", [_member("format_validate", ERRORS, [FORMAT, s], _validate)]),
        cel.FunctionDecl(
            "hasValue",
            [
                _member("format_errors_has_value", _T.BOOL, [ERRORS], lambda e: bool(e)),
                _member("format_named_has_value", _T.BOOL, [FORMAT], lambda f: bool(f)),
            ],
        ),
        cel.FunctionDecl(
            "value",
            [
                _member("format_errors_value", ERRORS, [ERRORS], _value),
                _member("format_named_value", FORMAT, [FORMAT], _value),
            ],
        ),
        cel.FunctionDecl("find", [_member("string_find", s, [s, s], _find)]),
        cel.FunctionDecl(
            "findAll",
            [
                _member("string_find_all", _T.List(s), [s, s], _find_all),
                _member("string_find_all_n", _T.List(s), [s, s, _T.INT], _find_all),
            ],
        ),
    ]
    return cel.CelExtension("kubernetes.format_regex", decls)
