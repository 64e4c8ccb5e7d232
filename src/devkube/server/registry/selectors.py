"""Label and field selectors as the API server parses them from query strings."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from devkube.server.errors import bad_request

Requirement = tuple[
    str, str, frozenset[str]
]  # (key, op, values); op in = != in notin exists !exists

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)\s*$")


def _split_terms(text: str) -> list[str]:
    """Split on commas outside parentheses (set-based values contain commas)."""
    terms: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return [t for t in terms if t.strip()]


def parse_label_selector(text: str | None) -> tuple[Requirement, ...]:
    if not text:
        return ()
    reqs: list[Requirement] = []
    for term in _split_terms(text):
        eq = _EQ_RE.match(term)
        if eq:
            key, op, value = eq.groups()
            reqs.append((key, "!=" if op == "!=" else "=", frozenset({value})))
            continue
        st = _SET_RE.match(term)
        if not st:
            raise bad_request(f"unable to parse requirement: invalid label selector {term!r}")
        bang, key, op, values = st.groups()
        if op:
            if bang:
                raise bad_request(f"unable to parse requirement: {term!r}")
            vals = frozenset(v.strip() for v in values.split(",") if v.strip())
            reqs.append((key, op, vals))
        else:
            reqs.append((key, "!exists" if bang else "exists", frozenset()))
    return tuple(reqs)


def labels_match(reqs: tuple[Requirement, ...], labels: Mapping[str, str]) -> bool:
    for key, op, values in reqs:
        present = key in labels
        if op == "=" or op == "in":
            if not present or labels[key] not in values:
                return False
        elif op == "!=" or op == "notin":
            if present and labels[key] in values:
                return False
        elif op == "exists":
            if not present:
                return False
        elif present:  # !exists
            return False
    return True


def _path_getter(path: str) -> Callable[[Mapping[str, Any]], str]:
    parts = path.split(".")

    def get(obj: Mapping[str, Any]) -> str:
        cur: Any = obj
        for part in parts:
            if not isinstance(cur, Mapping):
                return ""
            cur = cur.get(part)
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


# Field paths each resource supports besides metadata.name / metadata.namespace.
EXTRA_FIELDS: dict[str, frozenset[str]] = {
    "pods": frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    "events": frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "regarding.kind",
            "regarding.name",
            "regarding.namespace",
            "regarding.uid",
            "reportingController",
            "note",
        }
    ),
    "namespaces": frozenset({"status.phase"}),
    "nodes": frozenset({"spec.unschedulable"}),
    "secrets": frozenset({"type"}),
}


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[tuple[Callable[[Mapping[str, Any]], str], bool, str], ...]

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all((get(obj) == value) == positive for get, positive, value in self.terms)


def parse_field_selector(
    text: str | None, plural: str, alias: Callable[[str], str] = lambda path: path
) -> FieldSelector | None:
    """`alias` maps a path of the served shape to the stored shape (events.k8s.io Events)."""
    if not text:
        return None
    allowed = {"metadata.name", "metadata.namespace"} | EXTRA_FIELDS.get(plural, frozenset())
    terms = []
    for term in _split_terms(text):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not m:
            raise bad_request(f"invalid field selector {term!r}")
        path, op, value = m.groups()
        if path not in allowed:
            raise bad_request(
                f'"{path}" is not a known field selector: only "metadata.name", '
                '"metadata.namespace" and per-kind fields'
            )
        terms.append((_path_getter(alias(path)), op != "!=", value))
    return FieldSelector(tuple(terms))


@dataclass(frozen=True)
class Selection:
    """What one list or watch asks for: a namespace (or all) plus label and field selectors."""

    namespace: str | None
    labels: tuple[Requirement, ...] = ()
    fields: FieldSelector | None = None

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        if self.labels and not labels_match(self.labels, meta.get("labels") or {}):
            return False
        return self.fields is None or self.fields.matches(obj)
