"""One pass for one RayService: from what was observed to the writes, the status and the Events
(docs/design.md §12). Pure: the clock, the random suffix and the Serve API's answers come in.

KubeRay v1.7's ``RayServiceReconciler.Reconcile`` in order, rule by rule (RS1..RS7): validate;
delete the clusters traffic left once their delay has passed; create the pending cluster;
update a cluster in place when worker groups were only appended; keep ``ray.io/serve`` on the
pods (RS4: a slice's hosts by their slice and their own proxies); deploy the Serve config
where it is not yet deployed; point the serve service at
the pending cluster once it is ready (RS5: every slice whole, every application RUNNING),
which promotes it; name a new pending cluster when rayClusterConfig changed (NewCluster);
then the status and conditions.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import yaml

from kubefacts.timestamps import rfc3339
from raycluster_operator.api import labels
from raycluster_operator.api.rayservice_crd import INCREMENTAL, NEW_CLUSTER, UPGRADE_TYPES
from raycluster_operator.builders import rayservice as build
from raycluster_operator.planning.rayjob.slices import slices_ready
from raycluster_operator.planning.rayservice.model import (
    Action,
    ActionKind,
    Context,
    Event,
    Observed,
    Plan,
    ServeAnswer,
)
from raycluster_operator.planning.rayservice.serving import Relabel, endpoints, relabels

READY = "Ready"
UPGRADE_IN_PROGRESS = "UpgradeInProgress"
RUNNING = "RUNNING"
#: KubeRay's default rayClusterDeletionDelaySeconds.
DELETION_DELAY = 60
ACTIVE = "activeServiceStatus"
PENDING = "pendingServiceStatus"
SERVICE_STATUS = "serviceStatus"


def _spec(observed: Observed) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = observed.rayservice.get("spec") or {}
    return spec


def _name(observed: Observed) -> str:
    return str((observed.rayservice.get("metadata") or {}).get("name"))


def invalid_spec(spec: Mapping[str, Any], gateway_api: bool) -> str:
    """Why the spec cannot run ("" when it can): KubeRay's ValidateRayServiceSpec in its words,
    and ours: NewClusterWithIncrementalUpgrade needs the Gateway API served."""
    strategy = (spec.get("upgradeStrategy") or {}).get("type")
    if strategy is not None and strategy not in UPGRADE_TYPES:
        return (
            f"The RayService spec is invalid: Spec.UpgradeStrategy.Type value {strategy} is "
            f"invalid, valid options are {INCREMENTAL}, {NEW_CLUSTER}, or None"
        )
    if strategy == INCREMENTAL and not gateway_api:
        return (
            f"The RayService spec is invalid: upgradeStrategy.type {INCREMENTAL} needs the "
            "Gateway API (gateway.networking.k8s.io), which this cluster does not serve; use "
            f"{NEW_CLUSTER} (a whole new cluster, traffic switched once it is ready) or None"
        )
    if strategy == INCREMENTAL:
        return (
            f"The RayService spec is invalid: upgradeStrategy.type {INCREMENTAL} is not "
            f"supported by this operator yet; use {NEW_CLUSTER} or None"
        )
    head = (spec.get("rayClusterConfig") or {}).get("headGroupSpec") or {}
    if ((head.get("headService") or {}).get("metadata") or {}).get("name"):
        return (
            "The RayService spec is invalid: spec.rayClusterConfig.headGroupSpec.headService."
            "metadata.name should not be set"
        )
    try:
        build.serve_config({"spec": spec})
    except (ValueError, yaml.YAMLError) as error:
        return f"The RayService spec is invalid: serveConfigV2: {error}"
    return ""


def plan_rayservice(observed: Observed, ctx: Context) -> Plan:
    status = copy.deepcopy(dict(observed.rayservice.get("status") or {}))
    plan = Plan(status=status)
    meta = observed.rayservice.get("metadata") or {}
    if meta.get("generation") is not None:
        status["observedGeneration"] = meta["generation"]
    problem = invalid_spec(_spec(observed), observed.gateway_api)
    if problem:
        _condition(plan, READY, "False", "ValidationFailed", problem)
        if _changed(observed, plan, READY):
            plan.events.append(Event("Warning", "InvalidRayServiceSpec", problem))
        plan.status[SERVICE_STATUS] = ""
        return _finish(observed, ctx, plan)
    _clean_up(observed, ctx, plan)
    active_name = str((status.get(ACTIVE) or {}).get("rayClusterName") or "")
    pending_name = str((status.get(PENDING) or {}).get("rayClusterName") or "")
    active = observed.clusters.get(active_name) if active_name else None
    pending = observed.clusters.get(pending_name) if pending_name else None
    if pending_name and pending is None:
        body = build.ray_cluster(observed.rayservice, pending_name)
        plan.actions.append(Action(ActionKind.CREATE_CLUSTER, pending_name, body))
        plan.events.append(
            Event("Normal", "CreatedRayCluster", f"Created RayCluster {pending_name}")
        )
    upgrading = bool(active_name and pending_name)
    if active is not None and not upgrading:
        _update_in_place(observed, plan, active)
    if pending is not None:
        _update_in_place(observed, plan, pending)
    changes = {name: _relabel(observed, plan, name) for name in (active_name, pending_name) if name}
    pending_ready = pending is not None and _serve(observed, plan, pending_name, PENDING)
    active_ready = False
    if active is not None and pending is None and not _needs_new_cluster(observed, active):
        active_ready = _serve(observed, plan, active_name, ACTIVE)
    target = pending_name if pending_ready else active_name if active_ready else ""
    if target:
        _point_head_service(observed, plan, target)
        _point_service(observed, plan, target)
    served = _served_cluster(observed, plan)
    if served and served == pending_name:
        _promote(plan)
        active_name, pending_name = pending_name, ""
        active, pending = pending, None
    if _prepare_new_cluster(observed, active, pending):
        new = f"{_name(observed)}-{ctx.suffix}"
        plan.status[PENDING] = {"rayClusterName": new}
        plan.requeue_after = 0.0
    _mirror(plan, ACTIVE, observed.clusters.get(active_name) if active_name else None)
    _mirror(plan, PENDING, observed.clusters.get(pending_name) if pending_name else None)
    count = 0
    if served:
        count = endpoints(observed.pods.get(served, ()), changes.get(served, []))
    plan.status["numServeEndpoints"] = count
    _conditions(observed, plan)
    if observed.clusters:
        _requeue(plan, ctx.poll)  # Serve's state is not watched: asked again, as KubeRay
    return _finish(observed, ctx, plan)


def _finish(observed: Observed, ctx: Context, plan: Plan) -> Plan:
    """Times of this pass written in: each condition's new ``lastTransitionTime``, and
    ``lastUpdateTime`` when anything else changed (KubeRay writes it on every change)."""
    now = rfc3339(ctx.now)
    for condition in plan.status.get("conditions") or []:
        if condition.get("lastTransitionTime") == _NOW:
            condition["lastTransitionTime"] = now
    old = observed.rayservice.get("status") or {}
    if _without_stamp(plan.status) != _without_stamp(old):
        plan.status["lastUpdateTime"] = now
    return plan


def _without_stamp(status: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in status.items() if k != "lastUpdateTime"}


#: A condition's transition time before ``_finish`` writes the pass's clock in.
_NOW = "now"


# -- RS6: clusters traffic left ---------------------------------------------------------------


def _clean_up(observed: Observed, ctx: Context, plan: Plan) -> None:
    """Owned clusters neither active nor pending go once ``rayClusterDeletionDelaySeconds``
    (60 by default) have passed since they were first seen so."""
    status = plan.status
    keep = {
        (status.get(ACTIVE) or {}).get("rayClusterName"),
        (status.get(PENDING) or {}).get("rayClusterName"),
    }
    delay = _spec(observed).get("rayClusterDeletionDelaySeconds")
    wait = timedelta(seconds=DELETION_DELAY if delay is None else max(0, int(delay)))
    for name, cluster in sorted(observed.clusters.items()):
        if name in keep or (cluster.get("metadata") or {}).get("deletionTimestamp"):
            continue
        since = observed.dangling_since.get(name, ctx.now)
        due = since + wait
        if ctx.now >= due:
            plan.actions.append(Action(ActionKind.DELETE_CLUSTER, name))
            note = f"Deleted RayCluster {name}: no traffic for {int(wait.total_seconds())} s"
            plan.events.append(Event("Normal", "DeletedRayCluster", note))
        else:
            _requeue(plan, (due - ctx.now).total_seconds())


def _requeue(plan: Plan, seconds: float) -> None:
    if plan.requeue_after is None or seconds < plan.requeue_after:
        plan.requeue_after = max(0.0, seconds)


# -- RS2: which cluster the spec wants --------------------------------------------------------


def _annotations(cluster: Mapping[str, Any]) -> Mapping[str, str]:
    value: Mapping[str, str] = (cluster.get("metadata") or {}).get("annotations") or {}
    return value


def _hash_equal(observed: Observed, cluster: Mapping[str, Any]) -> bool:
    return _annotations(cluster).get(build.SPEC_HASH) == build.spec_hash(observed.rayservice)


def _appended_only(observed: Observed, cluster: Mapping[str, Any]) -> bool:
    """Only worker groups appended at the end changed (KubeRay updates such a cluster)."""
    try:
        groups = int(_annotations(cluster).get(build.NUM_WORKER_GROUPS, ""))
    except ValueError:
        return False
    if build.worker_groups(observed.rayservice) < groups:
        return False
    partial = build.spec_hash(observed.rayservice, groups)
    return _annotations(cluster).get(build.SPEC_HASH) == partial


def _needs_new_cluster(observed: Observed, cluster: Mapping[str, Any]) -> bool:
    """KubeRay's shouldPrepareNewCluster for an existing cluster: the spec changed beyond
    appended groups, and the strategy is NewCluster (the default)."""
    if _hash_equal(observed, cluster) or _appended_only(observed, cluster):
        return False
    strategy = (_spec(observed).get("upgradeStrategy") or {}).get("type") or NEW_CLUSTER
    return bool(strategy == NEW_CLUSTER)


def _prepare_new_cluster(
    observed: Observed, active: Mapping[str, Any] | None, pending: Mapping[str, Any] | None
) -> bool:
    status_pending = (observed.rayservice.get("status") or {}).get(PENDING) or {}
    if pending is None and status_pending.get("rayClusterName"):
        return False  # named and being created: the cache does not show it yet
    if active is None and pending is None:
        return True  # a new service, or one whose clusters are gone
    cluster = pending if pending is not None else active
    assert cluster is not None
    return _needs_new_cluster(observed, cluster)


def _update_in_place(observed: Observed, plan: Plan, cluster: Mapping[str, Any]) -> None:
    if _hash_equal(observed, cluster) or not _appended_only(observed, cluster):
        return
    name = str(cluster["metadata"]["name"])
    goal = build.ray_cluster(observed.rayservice, name)
    existing = (cluster.get("spec") or {}).get("suspend")
    spec = dict(goal["spec"])
    if existing is not None:
        spec["suspend"] = existing
    body = {"metadata": {"annotations": goal["metadata"]["annotations"]}, "spec": spec}
    plan.actions.append(Action(ActionKind.UPDATE_CLUSTER, name, body))
    plan.events.append(Event("Normal", "UpdatedRayCluster", f"Updated the RayCluster {name}"))


# -- RS4: ray.io/serve ------------------------------------------------------------------------


def _relabel(observed: Observed, plan: Plan, cluster_name: str) -> list[Relabel]:
    cluster = observed.clusters.get(cluster_name)
    if cluster is None:
        return []
    exclude = bool(_spec(observed).get("excludeHeadPodFromServeSvc"))
    answer = observed.serve.get(cluster_name)
    changes = relabels(cluster, observed.pods.get(cluster_name, ()), answer, exclude_head=exclude)
    told: set[tuple[str, str]] = set()
    for change in changes:
        plan.actions.append(Action(ActionKind.LABEL_POD, change.pod, {"value": change.value}))
        if not change.slice:
            note = f'Updated the serve label to "{change.value}" for the head pod {change.pod}'
            plan.events.append(Event("Normal", "UpdatedHeadPodServeLabel", note))
        elif (change.slice, change.value) not in told and (
            # A host of a whole slice whose own proxy stops answering leaves alone, as a
            # KubeRay worker whose serving readiness fails: no slice Event.
            change.value == labels.SERVE_TRUE or not change.whole
        ):
            told.add((change.slice, change.value))
            plan.events.append(_slice_event(cluster_name, change))
    return changes


def _slice_event(cluster: str, change: Relabel) -> Event:
    if change.value == labels.SERVE_TRUE:
        note = (
            f"RayCluster {cluster}: slice {change.slice} is whole: its hosts with a Serve "
            "proxy serve"
        )
        return Event("Normal", "SliceServing", note)
    note = (
        f"RayCluster {cluster}: slice {change.slice} is {change.state}: its hosts leave the "
        "serve service until the slice is whole again"
    )
    return Event("Warning", "SliceNotServing", note)


# -- RS3: Serve applications ------------------------------------------------------------------


def _serve(observed: Observed, plan: Plan, cluster_name: str, which: str) -> bool:
    """Deploy serveConfigV2 where it is not deployed, read the applications back; whether the
    cluster may take traffic: every application RUNNING (KubeRay) and every worker slice
    whole (ours, RS5)."""
    answer = observed.serve.get(cluster_name, ServeAnswer())
    section = plan.status.setdefault(which, {})
    if not answer.asked or not answer.reachable:
        return False
    apps = _applications(answer.applications)
    section["applicationStatuses"] = apps
    config = str(_spec(observed).get("serveConfigV2") or "")
    deployed = observed.deployed.get(cluster_name, "")
    if config and (deployed != config or not apps):
        body = build.serve_config(observed.rayservice)
        plan.actions.append(Action(ActionKind.DEPLOY_SERVE, cluster_name, body))
        note = f"Updated serve applications to the RayCluster {cluster_name}"
        plan.events.append(Event("Normal", "UpdatedServeApplications", note))
        _requeue(plan, 0.0)
        return False
    running = bool(apps) and all(a.get("status") == RUNNING for a in apps.values())
    cluster = observed.clusters[cluster_name]
    whole = slices_ready(cluster.get("status") or {}, _workers(observed, cluster_name))
    return running and whole


def _workers(observed: Observed, cluster_name: str) -> list[Mapping[str, Any]]:
    return [
        p
        for p in observed.pods.get(cluster_name, ())
        if ((p.get("metadata") or {}).get("labels") or {}).get(labels.NODE_TYPE)
        == labels.NODE_TYPE_WORKER
    ]


def _applications(found: Mapping[str, Any]) -> dict[str, Any]:
    """Serve's answer as KubeRay writes it: the unnamed application as ``default``."""
    out: dict[str, Any] = {}
    for name, app in sorted(found.items()):
        deployments = {
            str(d): _status_message(v) for d, v in sorted((app.get("deployments") or {}).items())
        }
        entry: dict[str, Any] = _status_message(app)
        if deployments:
            entry["serveDeploymentStatuses"] = deployments
        out[str(name) or "default"] = entry
    return out


def _status_message(found: Mapping[str, Any]) -> dict[str, str]:
    entry = {"status": str(found.get("status") or "")}
    if found.get("message"):
        entry["message"] = str(found["message"])
    return entry


# -- RS5: the serve service -------------------------------------------------------------------


def _service_cluster(service: Mapping[str, Any] | None) -> str:
    if service is None:
        return ""
    selector = (service.get("spec") or {}).get("selector") or {}
    return str(selector.get(labels.CLUSTER) or "")


def _point_service(observed: Observed, plan: Plan, target: str) -> None:
    try:
        goal = build.serve_service(observed.rayservice, target)
    except build.NoServePort as error:
        plan.events.append(Event("Warning", "FailedToCreateService", str(error)))
        return
    name = goal["metadata"]["name"]
    current = observed.serve_service
    if current is None:
        plan.actions.append(Action(ActionKind.CREATE_SERVICE, name, goal))
        plan.events.append(Event("Normal", "CreatedService", f"Created the service {name}"))
    elif _service_cluster(current) != target:
        patch = {"spec": {"selector": goal["spec"]["selector"]}}
        plan.actions.append(Action(ActionKind.PATCH_SERVICE, name, patch))
        note = f"Updated the service {name}: traffic moves to RayCluster {target}"
        plan.events.append(Event("Normal", "UpdatedService", note))


def _point_head_service(observed: Observed, plan: Plan, target: str) -> None:
    """``<name>-head-svc`` follows the serve service: created with it, its selector moved to
    the head of the cluster traffic moves to (KubeRay updates it only when the cluster
    switches; a head service is headless, so there is no cluster IP to keep)."""
    goal = build.head_service(observed.rayservice, observed.clusters[target])
    name = goal["metadata"]["name"]
    current = observed.head_service
    if current is None:
        plan.actions.append(Action(ActionKind.CREATE_SERVICE, name, goal))
        plan.events.append(Event("Normal", "CreatedService", f"Created the service {name}"))
    elif _service_cluster(current) != target:
        patch = {"spec": {"selector": goal["spec"]["selector"]}}
        plan.actions.append(Action(ActionKind.PATCH_SERVICE, name, patch))
        plan.events.append(Event("Normal", "UpdatedService", f"Updated the service {name}"))


def _served_cluster(observed: Observed, plan: Plan) -> str:
    """The cluster the serve service points at once this plan is written (the head
    service's actions, whose selector names no ``ray.io/serve``, are not the switch)."""
    for action in plan.actions:
        if action.kind in (ActionKind.CREATE_SERVICE, ActionKind.PATCH_SERVICE):
            selector = action.body["spec"]["selector"]
            if labels.SERVE in selector:
                return str(selector[labels.CLUSTER])
    return _service_cluster(observed.serve_service)


def _promote(plan: Plan) -> None:
    plan.status[ACTIVE] = plan.status.get(PENDING) or {}
    plan.status[PENDING] = {}


# -- status -----------------------------------------------------------------------------------


def _mirror(plan: Plan, which: str, cluster: Mapping[str, Any] | None) -> None:
    section = plan.status.setdefault(which, {})
    if cluster is None:
        section.pop("rayClusterStatus", None)
        if not section.get("rayClusterName"):
            plan.status[which] = {}
        return
    cluster_status = cluster.get("status")
    if cluster_status:
        section["rayClusterStatus"] = copy.deepcopy(cluster_status)


def _find(plan: Plan, kind: str) -> dict[str, Any] | None:
    for condition in plan.status.get("conditions") or []:
        if condition.get("type") == kind:
            found: dict[str, Any] = condition
            return found
    return None


def _changed(observed: Observed, plan: Plan, kind: str) -> bool:
    before = [
        c
        for c in (observed.rayservice.get("status") or {}).get("conditions") or []
        if c.get("type") == kind
    ]
    now = _find(plan, kind)
    if not before or now is None:
        return True
    return bool(
        (before[0].get("reason"), before[0].get("message")) != (now["reason"], now["message"])
    )


def _condition(plan: Plan, kind: str, status: str, reason: str, message: str) -> None:
    """metav1.SetStatusCondition: lastTransitionTime moves only with the status."""
    conditions: list[dict[str, Any]] = plan.status.setdefault("conditions", [])
    generation = plan.status.get("observedGeneration")
    current = _find(plan, kind)
    entry = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": _NOW,
    }
    if generation is not None:
        entry["observedGeneration"] = generation
    if current is None:
        conditions.append(entry)
        return
    if current.get("status") == status:
        entry["lastTransitionTime"] = current.get("lastTransitionTime") or _NOW
    current.clear()
    current.update(entry)


def _conditions(observed: Observed, plan: Plan) -> None:
    """KubeRay's calculateConditions."""
    if not plan.status.get("conditions"):
        message = "RayService is initializing"
        _condition(plan, READY, "False", "Initializing", message)
        _condition(plan, UPGRADE_IN_PROGRESS, "False", "Initializing", message)
    ready = _find(plan, READY)
    if plan.status["numServeEndpoints"] > 0:
        message = "Number of serve endpoints is greater than 0"
        _condition(plan, READY, "True", "NonZeroServeEndpoints", message)
    elif ready is not None and ready.get("status") == "True":
        message = "Number of serve endpoints dropped to 0"
        _condition(plan, READY, "False", "ZeroServeEndpoints", message)
    elif ready is not None and ready.get("reason") == "ValidationFailed":
        _condition(plan, READY, "False", "Initializing", "RayService is initializing")
    active = (plan.status.get(ACTIVE) or {}).get("rayClusterName")
    pending = (plan.status.get(PENDING) or {}).get("rayClusterName")
    if active and pending:
        message = "Both active and pending Ray clusters exist"
        _condition(plan, UPGRADE_IN_PROGRESS, "True", "BothActivePendingClustersExist", message)
    elif active:
        message = "Active Ray cluster exists and no pending Ray cluster"
        _condition(plan, UPGRADE_IN_PROGRESS, "False", "NoPendingCluster", message)
    else:
        upgrade = _find(plan, UPGRADE_IN_PROGRESS)
        if upgrade is None or upgrade.get("reason") != "Initializing":
            message = "No active Ray cluster exists, and the RayService is not initializing."
            _condition(plan, UPGRADE_IN_PROGRESS, "Unknown", "NoActiveCluster", message)
    ready = _find(plan, READY)
    plan.status[SERVICE_STATUS] = "Running" if ready and ready["status"] == "True" else ""
