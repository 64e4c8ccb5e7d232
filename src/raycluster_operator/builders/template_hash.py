"""Template identity: which spec fields shape a pod, folded into one short hash per group.

An upgrade needs to know whether a running pod was built from today's spec. Rebuilding a pod
to compare it would drag in its identity (names, indices, hostnames), so the hash is taken
over the *inputs* that shape a group's pods instead: the group's template and Ray settings,
and the few cluster-wide facts the builders read (the GCS port, autoscaler v2, the
overwrite-command annotation). Fields that only say how many pods exist (replicas, min/max,
workersToDelete, suspend, idle timeout) or how many may go at once (maxUnavailable) are left
out, so scaling never looks like an upgrade. So are the fields the models do not declare
(KubeRay's ``priority``, ``ingressOptions``, ...): the builders never read them, and our CRD
prunes them. And so is every value KubeRay's CRD defaults and ours does not (a port's
``protocol: TCP``, a reference's ``name: ""``, ...) wherever it stands at that default:
kube-apiserver applies a CRD's defaults as it reads a stored object, so once KubeRay's CRD
replaces ours the same cluster reads with them, and a hash over them would call every running
pod outdated (under ``Recreate``, the whole fleet deleted). Each means what its absence means.
The same holds the other way for our extension ``maxUnavailable``, which KubeRay's CRD prunes.
See docs/design.md §3.8.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from pydantic import BaseModel

from raycluster_operator.api.models import RayCluster, WorkerGroupSpec
from raycluster_operator.builders.cluster_facts import (
    autoscaler_v2,
    autoscaling_enabled,
    gcs_port,
    overwrite_cmd,
)

#: Worker group fields that count pods, or bound how many may go at once, instead of shaping
#: them (python names).
_COUNTING = frozenset(
    {
        "replicas",
        "min_replicas",
        "max_replicas",
        "scale_strategy",
        "suspend",
        "idle_timeout_seconds",
        "max_unavailable",
    }
)
#: (key of the enclosing object, field) -> the default KubeRay v1.7's ``rayclusters.ray.io``
#: declares there and ours does not; the items of a list have the list's key. Nearly all are
#: Kubernetes' own defaults for pod fields (a reference's empty name, a port's TCP), which the
#: server applies to the pods anyway. (A worker group's ``priority: 0`` is one too, but the
#: models do not declare ``priority``, so it is never hashed: `_declared`.)
_KUBERAY_DEFAULTS: dict[tuple[str, str], object] = {
    **{
        (ref, "name"): ""
        for ref in (
            "configMap",
            "configMapKeyRef",
            "configMapRef",
            "imagePullSecrets",
            "nodePublishSecretRef",
            "secret",
            "secretKeyRef",
            "secretRef",
        )
    },
    ("ports", "protocol"): "TCP",
    ("grpc", "service"): "",
    ("fileKeyRef", "optional"): False,
    ("azureDisk", "fsType"): "ext4",
    ("azureDisk", "readOnly"): False,
    ("iscsi", "iscsiInterface"): "default",
    ("rbd", "keyring"): "/etc/ceph/keyring",
    ("rbd", "pool"): "rbd",
    ("rbd", "user"): "admin",
    ("scaleIO", "fsType"): "xfs",
    ("scaleIO", "storageMode"): "ThinProvisioned",
}
_NO_DEFAULT = object()
#: Length of the hex digest kept: 10 hex digits are ample for the few templates one group
#: ever sees, and short enough to read in ``kubectl get pods -o yaml``.
_DIGITS = 10


def worker_template_hash(cluster: RayCluster, group: WorkerGroupSpec) -> str:
    shaping = _declared(group, _COUNTING)
    return _digest(
        {"group": _undefaulted(shaping, "workerGroupSpecs"), "cluster": _cluster_inputs(cluster)}
    )


def head_template_hash(cluster: RayCluster) -> str:
    spec = cluster.spec
    head = _declared(spec.head_group_spec)
    options = spec.autoscaler_options
    return _digest(
        {
            "head": _undefaulted(head, "headGroupSpec"),
            "autoscaling": autoscaling_enabled(cluster),
            "autoscalerOptions": _undefaulted(_declared(options), "autoscalerOptions")
            if options is not None
            else None,
            "cluster": _cluster_inputs(cluster),
        }
    )


def recreate_hash(cluster: RayCluster) -> str:
    """KubeRay's ``ray.io/upgrade-strategy-recreate-hash`` of the head pod, with its meaning:
    one hash of the whole spec, less what KubeRay mutes because others write it (a group's
    replicas, min, max and workersToDelete; the templates' tolerations and scheduling gates,
    which Kueue injects; the upgrade strategy), in KubeRay's form (base32hex of a SHA-1).
    KubeRay's own value hashes its Go types' JSON, which no other program reproduces, so the
    values differ between the two operators; what it says does not (docs/design.md §3.8)."""
    spec = cluster.spec.model_dump(by_alias=True, exclude_none=True)
    spec.pop("upgradeStrategy", None)
    _mute_template(spec.get("headGroupSpec"))
    for group in spec.get("workerGroupSpecs") or ():
        for field in ("replicas", "minReplicas", "maxReplicas"):
            group.pop(field, None)
        strategy = group.pop("scaleStrategy", None)
        if isinstance(strategy, dict):
            strategy.pop("workersToDelete", None)
            if strategy:  # an empty one means what none means
                group["scaleStrategy"] = strategy
        _mute_template(group)
    text = json.dumps(_undefaulted(spec, "spec"), sort_keys=True, separators=(",", ":"))
    return base64.b32hexencode(hashlib.sha1(text.encode(), usedforsecurity=False).digest()).decode()


def _mute_template(group: Any) -> None:
    spec = ((group or {}).get("template") or {}).get("spec")
    if isinstance(spec, dict):
        spec.pop("tolerations", None)
        spec.pop("schedulingGates", None)


def _cluster_inputs(cluster: RayCluster) -> dict[str, Any]:
    return {
        "gcsPort": gcs_port(cluster),
        "autoscalerV2": autoscaler_v2(cluster),
        "overwriteCmd": overwrite_cmd(cluster),
    }


def _declared(model: BaseModel, leave_out: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``model`` as JSON without the fields it does not declare (kept by ``extra="allow"``:
    KubeRay's fields our schema lacks, which the builders never read) nor ``leave_out``."""
    extra = set(model.model_extra or {})
    dumped: dict[str, Any] = model.model_dump(
        by_alias=True, exclude=extra | leave_out, exclude_none=True
    )
    return dumped


def _undefaulted(value: Any, key: str) -> Any:
    """``value`` (found under ``key``) without the fields that stand at a KubeRay default: the
    same spec hashes alike whichever of the two CRDs the server read it through."""
    if isinstance(value, list):
        return [_undefaulted(item, key) for item in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for name, item in value.items():
        default = _KUBERAY_DEFAULTS.get((key, name), _NO_DEFAULT)
        # type() too: False == 0, and a priority of False is not the default 0
        if type(item) is type(default) and item == default:
            continue
        out[name] = _undefaulted(item, name)
    return out


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:_DIGITS]
