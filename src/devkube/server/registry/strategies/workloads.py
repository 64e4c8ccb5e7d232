"""Deployment and ReplicaSet validation kube-apiserver applies that controllers rely on
(docs/design.md §8, "Workloads"): a selector is required and not empty (a Deployment's), the
pod template's labels must match it, and a Deployment's selector never changes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubefacts.objects import Obj
from kubefacts.selectors import selects

Cause = tuple[str, str]


def _go_json(value: Any) -> str:
    """Go's encoding: map keys sorted, no spaces."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _go_selector(selector: Mapping[str, Any]) -> str:
    """A LabelSelector as Go prints it: matchLabels first, empty fields left out."""
    shown: dict[str, Any] = {}
    if selector.get("matchLabels"):
        shown["matchLabels"] = dict(sorted(selector["matchLabels"].items()))
    if selector.get("matchExpressions"):
        shown["matchExpressions"] = [
            {k: req[k] for k in ("key", "operator", "values") if req.get(k)}
            for req in selector["matchExpressions"]
        ]
    return json.dumps(shown, separators=(",", ":"))


def workload_causes(plural: str, obj: Obj) -> list[Cause]:
    spec = obj.get("spec") or {}
    selector = spec.get("selector")
    causes: list[Cause] = []
    if not isinstance(selector, Mapping):
        return [("spec.selector", "Required value")]
    empty = not (selector.get("matchLabels") or selector.get("matchExpressions"))
    if empty and plural == "deployments":
        why = "empty selector is invalid for deployment"
        causes.append(("spec.selector", f"Invalid value: {_go_selector(selector)}: {why}"))
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not empty and not selects(selector, labels):
        causes.append(
            (
                "spec.template.metadata.labels",
                f"Invalid value: {_go_json(labels)}: `selector` does not match template `labels`",
            )
        )
    return causes


def deployment_update_causes(old: Obj, new: Obj) -> list[Cause]:
    before = (old.get("spec") or {}).get("selector") or {}
    after = (new.get("spec") or {}).get("selector") or {}
    if _go_selector(before) == _go_selector(after):
        return []
    return [("spec.selector", f"Invalid value: {_go_selector(after)}: field is immutable")]
