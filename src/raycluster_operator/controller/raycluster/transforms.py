"""What the informer caches keep of each object: the fields the operator reads, nothing else.

A pod as the API server returns it is mostly what nobody here reads: ``managedFields``, the
whole container spec (command, env, volumes, resources), the kubelet's container statuses. At
1,000 RayClusters (9,000 pods) the cache of whole pods alone was most of the operator's memory
(docs/design.md §7). As controller-runtime's cache transforms and client-go's
``TransformFunc`` do, each informer passes every listed and watched object through a transform
before it is stored, and the store (and so every reader: the planner, the event recorder, the
sources) sees only the slim copy.

The fields kept are exactly those the typed views of ``api/objects.py`` expose and the
operator reads: a pod through ``planning/pods.read_pod`` (and
``controller/runtime/events.reference`` when a pod is an event's subject), a service through
``planning/services`` and ``planning/status``, the autoscaler's RBAC objects by name only. A
RayCluster is kept whole but for ``managedFields``: its spec is parsed and its status diffed
against the installed CRD (``controller/raycluster/crdfit.py``). Adding a read of another field
means adding it here: ``tests/controller/test_transforms.py`` plans over full and slim pods and
fails when a field the planner reads is dropped.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from raycluster_operator.api.labels import POD_TEMPLATE_HASH_ANNOTATION
from raycluster_operator.api.objects import Obj

#: Metadata every cached object keeps: identity, the cache key and its indices, the
#: resourceVersion a re-list compares, and what decides whether an object is going away.
_META = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
)
#: Pod fields read by ``read_pod`` beyond metadata.
#: resourceClaims: which ComputeDomain a GB200 slice's pods claim channels from (rule 13b).
_POD_SPEC = ("restartPolicy", "nodeName", "resourceClaims")
_POD_STATUS = ("phase", "podIP")


def _pick(source: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: source[k] for k in keys if k in source}


def _interned(values: Mapping[str, str]) -> dict[str, str]:
    """Label keys and values recur across thousands of pods (``ray.io/cluster``, group and
    node-type names): one string object each instead of one per pod."""
    return {sys.intern(k): sys.intern(v) if isinstance(v, str) else v for k, v in values.items()}


def _meta(obj: Obj, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    out = _pick(meta, _META + extra)
    if isinstance(out.get("labels"), Mapping):
        out["labels"] = _interned(out["labels"])
    return out


def _envelope(obj: Obj, meta: dict[str, Any]) -> Obj:
    """``apiVersion`` and ``kind`` (an event's ``regarding`` names them) and the metadata."""
    out: Obj = _pick(obj, ("apiVersion", "kind"))
    out["metadata"] = meta
    return out


#: Pod annotations the planner reads: the template identity (upgrades, the crash-loop backoff).
_POD_ANNOTATIONS = (POD_TEMPLATE_HASH_ANNOTATION,)


def slim_pod(obj: Obj) -> Obj:
    # deletionGracePeriodSeconds: a pod already force-deleted on a lost node (host loss).
    meta = _meta(obj, ("deletionGracePeriodSeconds",))
    # The controller reference alone, and of it only what decides whose pod it is (rules 2a,
    # 2b): the RayCluster's kind and uid.
    controller = [
        _pick(ref, ("kind", "uid", "controller"))
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ()
        if isinstance(ref, Mapping) and ref.get("controller") is True
    ]
    if controller:
        meta["ownerReferences"] = controller
    annotations = (obj.get("metadata") or {}).get("annotations")
    if isinstance(annotations, Mapping):
        kept = _pick(annotations, _POD_ANNOTATIONS)
        if kept:
            meta["annotations"] = kept
    out = _envelope(obj, meta)
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        slim_spec = _pick(spec, _POD_SPEC)
        # Only the names: which container is Ray's (the first) and which status is its own.
        slim_spec["containers"] = [
            {"name": c.get("name")} for c in spec.get("containers") or () if isinstance(c, Mapping)
        ]
        out["spec"] = slim_spec
    status = obj.get("status")
    if isinstance(status, Mapping):
        slim_status = _pick(status, _POD_STATUS)
        if "conditions" in status:
            # lastTransitionTime: when a host became (un)ready (host loss, backoff reset).
            slim_status["conditions"] = [
                _pick(c, ("type", "status", "lastTransitionTime"))
                for c in status.get("conditions") or ()
                if isinstance(c, Mapping)
            ]
        if "containerStatuses" in status:
            slim_status["containerStatuses"] = [
                _slim_container_status(s)
                for s in status.get("containerStatuses") or ()
                if isinstance(s, Mapping)
            ]
        out["status"] = slim_status
    return out


def _slim_container_status(status: Mapping[str, Any]) -> dict[str, Any]:
    """The container's name, its current state (``terminated`` decides ``failed``) and its last
    one (when the previous run started: host loss tells "was Ready" from it); not the image or
    the container ID."""
    return _pick(status, ("name", "state", "lastState"))


def slim_service(obj: Obj) -> Obj:
    out = _envelope(obj, _meta(obj, ("ownerReferences",)))
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        out["spec"] = _pick(spec, ("clusterIP", "ports"))
    return out


def slim_node(obj: Obj) -> Obj:
    """What host loss and planned disruptions read of a node (planning/features/host_loss.py,
    planning/features/disruption.py): its labels (a maintenance notice), taints, cordon and
    conditions."""
    out = _envelope(obj, _meta(obj))
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        # unschedulable: a cordon (planned disruptions, planning/features/disruption.py).
        kept = _pick(spec, ("taints", "unschedulable"))
        if kept:
            out["spec"] = kept
    status = obj.get("status")
    if isinstance(status, Mapping) and "conditions" in status:
        out["status"] = {
            "conditions": [
                _pick(c, ("type", "status", "reason"))
                for c in status.get("conditions") or ()
                if isinstance(c, Mapping)
            ]
        }
    return out


def slim_named(obj: Obj) -> Obj:
    """Objects the operator only checks for by name (the autoscaler's RBAC)."""
    return _envelope(obj, _meta(obj))


def slim_budget(obj: Obj) -> Obj:
    """A PodDisruptionBudget: its name (ours are checked for by name) and the selector (a
    user's budget over a slice's pods makes ours stand back, planning/budget_overlap.py).
    The status, which the disruption controller rewrites at every pod change, is not kept."""
    out = _envelope(obj, _meta(obj))
    spec = obj.get("spec") or {}
    if "selector" in spec:
        out["spec"] = {"selector": spec["selector"]}
    return out


def without_managed_fields(obj: Obj) -> Obj:
    """The whole object but ``metadata.managedFields``, which nothing here reads."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
