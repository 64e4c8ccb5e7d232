"""Indexed Jobs (``completionMode: Indexed``), as kube-controller-manager runs them
(``pkg/controller/job/indexed_job_utils.go``; docs/design.md §8, "Jobs"): each pod carries
its completion index, and the Job completes when every index below ``completions`` has
succeeded once.
"""

from __future__ import annotations

import copy
from typing import Any

from kubefacts.objects import Obj

INDEX_KEY = "batch.kubernetes.io/job-completion-index"
INDEX_ENV = "JOB_COMPLETION_INDEX"
#: apiserver's names.MaxGeneratedNameLength (63 - 5 random characters).
MAX_GENERATED_NAME = 58


def index_of(pod: Obj) -> int | None:
    """The pod's completion index from its annotation (None: absent or not a number)."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(INDEX_KEY)
    try:
        index = int(str(value))
    except ValueError:
        return None
    return index if index >= 0 else None


def indexes_text(indexes: set[int]) -> str:
    """kube's ``orderedIntervals.String``: "0-2,4,6,7" (two in a row are written "6,7")."""
    parts: list[str] = []
    ordered = sorted(indexes)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        first, last = ordered[i], ordered[j]
        if last == first:
            parts.append(str(first))
        elif last == first + 1:
            parts.append(f"{first},{last}")
        else:
            parts.append(f"{first}-{last}")
        i = j + 1
    return ",".join(parts)


def parse_indexes(text: str) -> set[int]:
    found: set[int] = set()
    for part in filter(None, (text or "").split(",")):
        first, _, last = part.partition("-")
        found.update(range(int(first), int(last or first) + 1))
    return found


def pending(count: int, completions: int, taken: set[int]) -> list[int]:
    """kube's ``firstPendingIndexes``: the lowest ``count`` indexes not taken."""
    return [i for i in range(completions) if i not in taken][:count]


def generate_name(job_name: str, index: int) -> str:
    """kube's ``podGenerateNameWithIndex``: ``<job>-<index>-``, the job name cut to fit."""
    suffix = f"-{index}-"
    prefix = job_name + suffix
    if len(prefix) > MAX_GENERATED_NAME:
        prefix = prefix[: MAX_GENERATED_NAME - len(suffix)] + suffix
    return prefix


def with_index(pod: dict[str, Any], job_name: str, index: int) -> dict[str, Any]:
    """The pod of index ``index``: annotation and label, hostname ``<job>-<index>``, and
    ``JOB_COMPLETION_INDEX`` from the label in every container that does not set it."""
    pod = copy.deepcopy(pod)
    meta = pod["metadata"]
    meta.setdefault("annotations", {})[INDEX_KEY] = str(index)
    meta.setdefault("labels", {})[INDEX_KEY] = str(index)
    meta["generateName"] = generate_name(job_name, index)
    spec = pod.setdefault("spec", {}) or {}
    pod["spec"] = spec
    spec["hostname"] = f"{job_name}-{index}"
    env_var = {
        "name": INDEX_ENV,
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{INDEX_KEY}']"}},
    }
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            env = container.setdefault("env", [])
            if not any(e.get("name") == INDEX_ENV for e in env):
                env.append(dict(env_var))
    return pod
