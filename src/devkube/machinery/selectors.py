"""Label selectors and node selector requirements, evaluated the way the API server means them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _requirement_matches(labels: Mapping[str, str], requirement: Mapping[str, Any]) -> bool:
    key = str(requirement.get("key", ""))
    operator = str(requirement.get("operator", ""))
    values = [str(v) for v in requirement.get("values") or []]
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        # Node affinity only: both sides must be integers, anything else never matches.
        if not present or len(values) != 1:
            return False
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector: matchLabels and matchExpressions all hold. None matches nothing,
    an empty selector matches everything (as in pod affinity terms)."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(
        _requirement_matches(labels, requirement)
        for requirement in selector.get("matchExpressions") or []
    )


def node_selector_term_matches(
    term: Mapping[str, Any], labels: Mapping[str, str], node_name: str
) -> bool:
    """One nodeSelectorTerm: its matchExpressions (on labels) and matchFields (on the name) all
    hold. A term with no requirements matches no node, as in Kubernetes."""
    expressions: Sequence[Mapping[str, Any]] = term.get("matchExpressions") or []
    fields: Sequence[Mapping[str, Any]] = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    if not all(_requirement_matches(labels, r) for r in expressions):
        return False
    name_labels = {"metadata.name": node_name}
    return all(_requirement_matches(name_labels, r) for r in fields)
