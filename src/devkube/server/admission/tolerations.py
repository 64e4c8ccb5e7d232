"""DefaultTolerationSeconds, a mutating admission the real API server applies to new pods.

Every new pod that does not already tolerate them gets the
`node.kubernetes.io/not-ready` and `node.kubernetes.io/unreachable` NoExecute tolerations for
300 s, so a node that goes NotReady/Unknown evicts its pods after five minutes, not at once.
A toleration with an empty key (operator Exists) or an empty effect counts as tolerating
them, as in kube-apiserver's plugin.
"""

from __future__ import annotations

from typing import Any

from devkube.server.registry.resources import ResourceType
from kubefacts.objects import Obj

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300


def _covers(toleration: dict[str, Any], key: str) -> bool:
    return toleration.get("key", "") in ("", key) and toleration.get("effect", "") in (
        "",
        "NoExecute",
    )


def default_toleration_seconds(pod: dict[str, Any]) -> None:
    spec = pod.setdefault("spec", {})
    tolerations = list(spec.get("tolerations") or [])
    added = False
    for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
        if not any(_covers(t, key) for t in tolerations if isinstance(t, dict)):
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )
            added = True
    if added:
        spec["tolerations"] = tolerations


def default_tolerations(rt: ResourceType, old: Obj | None, new: Obj) -> None:
    """The plugin: only a new pod is defaulted, as kube-apiserver's plugin admits creates."""
    if old is None and rt.builtin and not rt.group and rt.plural == "pods":
        default_toleration_seconds(new)
