"""What a finished RayJob deletes, and when (docs/design.md §11): KubeRay's deletionStrategy
(rules by outcome, each after its own TTL, or the legacy onSuccess/onFailure pair after
ttlSecondsAfterFinished) and shutdownAfterJobFinishes (the cluster, after the TTL). A RayJob
that runs on a selected cluster deletes nothing. Each policy is planned until it is done, so a
restarted operator finishes it, and nothing is deleted twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from kubefacts.timestamps import parse_time
from raycluster_operator.planning.rayjob.model import (
    Action,
    ActionKind,
    Context,
    Event,
    Observed,
    Plan,
)

#: Most impactful first (KubeRay's selectMostImpactfulRule).
IMPACT = ("DeleteSelf", "DeleteCluster", "DeleteWorkers", "DeleteNone")


def _rules(spec: Mapping[str, Any], status: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(policy, ttl seconds) of every rule that applies to this outcome."""
    strategy = spec.get("deletionStrategy") or {}
    job_status = status.get("jobStatus")
    deployment = status.get("jobDeploymentStatus")
    if strategy.get("deletionRules"):
        out = []
        for rule in strategy["deletionRules"]:
            cond = rule.get("condition") or {}
            if cond.get("jobStatus") and cond["jobStatus"] != job_status:
                continue
            if cond.get("jobDeploymentStatus") and cond["jobDeploymentStatus"] != deployment:
                continue
            out.append((str(rule.get("policy")), int(cond.get("ttlSeconds") or 0)))
        return out
    ttl = int(spec.get("ttlSecondsAfterFinished") or 0)
    if strategy.get("onSuccess") or strategy.get("onFailure"):
        side = "onSuccess" if job_status == "SUCCEEDED" else "onFailure"
        policy = (strategy.get(side) or {}).get("policy")
        return [(str(policy), ttl)] if policy else []
    if spec.get("shutdownAfterJobFinishes"):
        return [("DeleteCluster", ttl)]
    return []


def _done(policy: str, observed: Observed) -> bool:
    cluster = observed.cluster
    if policy == "DeleteCluster":
        return cluster is None
    if policy == "DeleteWorkers":
        groups = (cluster or {}).get("spec", {}).get("workerGroupSpecs") or []
        return cluster is None or all(g.get("suspend") for g in groups)
    return policy == "DeleteNone"


def plan_deletion(observed: Observed, ctx: Context, plan: Plan) -> None:
    spec = observed.rayjob.get("spec") or {}
    if spec.get("clusterSelector") or not plan.status.get("endTime"):
        return
    ended = parse_time(str(plan.status["endTime"]))
    due = [(p, ttl) for p, ttl in _rules(spec, plan.status) if p in IMPACT]
    ripe = [p for p, ttl in due if ctx.now >= ended + timedelta(seconds=ttl)]
    later = [
        ttl for p, ttl in due if ctx.now < ended + timedelta(seconds=ttl) and not _done(p, observed)
    ]
    if later:
        wait = (ended + timedelta(seconds=min(later)) - ctx.now).total_seconds()
        plan.requeue_after = max(wait, 0.05)
    if not ripe:
        return
    policy = min(ripe, key=IMPACT.index)
    if _done(policy, observed):
        return
    name = str(plan.status.get("rayClusterName") or "")
    kinds = {
        "DeleteCluster": ActionKind.DELETE_CLUSTER,
        "DeleteWorkers": ActionKind.DELETE_WORKERS,
        "DeleteSelf": ActionKind.DELETE_SELF,
    }
    target = name if policy != "DeleteSelf" else str(observed.rayjob["metadata"]["name"])
    plan.actions.append(Action(kinds[policy], target))
    notes = {
        "DeleteCluster": f"Deleted RayCluster {name}",
        "DeleteWorkers": f"Suspended the worker groups of RayCluster {name}",
        "DeleteSelf": "Deleted the RayJob and what it owns",
    }
    plan.events.append(Event("Normal", policy, notes[policy]))
    plan.requeue_after = 1.0
