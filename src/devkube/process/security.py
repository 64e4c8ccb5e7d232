"""Who a container of the process runtime runs as, decided as the kubelet decides it.

- `runAsUser`, `runAsGroup` (container-level wins over the pod's) and the pod's
  `supplementalGroups` (and `fsGroup`, which the kubelet adds to them) become the process's
  uid, gid and groups (`setpriv`, after the pod's namespaces are joined);
- with neither level setting `runAsUser` the process runs as root: there are no images, so the
  "image user" is root;
- `runAsNonRoot: true` without a non-zero user is refused before the container starts, with
  the kubelet's `CreateContainerConfigError` and its message (`container has runAsNonRoot and
  image will run as root (pod: "<name>_<namespace>(<uid>)", container: <name>)`).

A non-root container cannot write what root owns on the shared file system; its private
/tmp (mode 1777) and its own working directory (made for it) stay writable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CONFIG_ERROR = "CreateContainerConfigError"


@dataclass(frozen=True)
class RunAs:
    uid: int
    gid: int
    groups: tuple[int, ...] = ()

    def setpriv(self) -> list[str]:
        groups = (
            [f"--groups={','.join(map(str, self.groups))}"] if self.groups else ["--clear-groups"]
        )
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", *groups, "--"]


def _effective(pod: Mapping[str, Any], container: Mapping[str, Any], key: str) -> Any:
    mine = container.get("securityContext") or {}
    if mine.get(key) is not None:
        return mine[key]
    return (pod.get("securityContext") or {}).get(key)


def run_as(pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> RunAs | None:
    """The user the container runs as; None for root with root's own groups."""
    uid = _effective(pod_spec, container, "runAsUser")
    gid = _effective(pod_spec, container, "runAsGroup")
    pod_sc = pod_spec.get("securityContext") or {}
    groups = [int(g) for g in pod_sc.get("supplementalGroups") or []]
    if pod_sc.get("fsGroup") is not None:
        groups.append(int(pod_sc["fsGroup"]))
    if uid is None and gid is None and not groups:
        return None
    return RunAs(int(uid or 0), int(gid if gid is not None else 0), tuple(dict.fromkeys(groups)))


def non_root_error(pod: Mapping[str, Any], container: Mapping[str, Any]) -> str:
    """The kubelet's refusal of a container whose runAsNonRoot it cannot honour, or ""."""
    spec = pod.get("spec") or {}
    if _effective(spec, container, "runAsNonRoot") is not True:
        return ""
    meta = pod.get("metadata") or {}
    where = (
        f'(pod: "{meta.get("name")}_{meta.get("namespace")}({meta.get("uid")})", '
        f"container: {container.get('name')})"
    )
    uid = _effective(spec, container, "runAsUser")
    if uid is not None and int(uid) == 0:
        return f"container's runAsUser breaks non-root policy {where}"
    if uid is None:
        return f"container has runAsNonRoot and image will run as root {where}"
    return ""
