"""A structured label selector (``metav1.LabelSelector``) against a set of labels, as
``metav1.LabelSelectorAsSelector`` reads it.

The operator needs it to know which pods a user's PodDisruptionBudget selects: the eviction
API refuses any pod two budgets select, so a budget of the user's over the same pods as one
of ours must be found before a drain meets it. policy/v1 reads a null selector as selecting
nothing and an empty one as selecting every pod of the namespace; the caller passes ``None``
for null. An operator this module does not know selects nothing (the API server would have
refused it, so such a selector can only come from a broken object).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether ``selector`` (``matchLabels`` and ``matchExpressions``, ANDed) matches."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_requirement(r, labels) for r in selector.get("matchExpressions") or ())


def _requirement(requirement: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = str(requirement.get("key") or "")
    operator = requirement.get("operator")
    values = {str(v) for v in requirement.get("values") or ()}
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False
