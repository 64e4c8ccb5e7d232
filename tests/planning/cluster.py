"""RayCluster objects and a plan-apply loop for cluster-level planning tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from raycluster_operator.api.models import RayCluster, RayClusterStatus, dump_cluster, load_cluster
from raycluster_operator.planning import (
    ClusterPlan,
    ClusterState,
    PlanContext,
    PlanOptions,
    plan_cluster,
)
from raycluster_operator.planning.features.backoff import BackoffPolicy

from .world import BASE, CLUSTER, NAMESPACE, World, suffixes


def container(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": "rayproject/ray:2.60.0",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }


def worker_group(name: str = "workers", **fields: Any) -> dict[str, Any]:
    return {
        "groupName": name,
        "template": {"spec": {"containers": [container("ray-worker")]}},
        **fields,
    }


def cluster_obj(*groups: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": CLUSTER, "namespace": NAMESPACE, "generation": 1},
        "spec": {
            "headGroupSpec": {"template": {"spec": {"containers": [container("ray-head")]}}},
            "workerGroupSpecs": list(groups),
            **spec,
        },
    }


def cluster(*groups: dict[str, Any], **spec: Any) -> RayCluster:
    return load_cluster(cluster_obj(*groups, **spec))


def plan_for(
    spec: RayCluster,
    pods: Sequence[Mapping[str, Any]],
    services: Sequence[Mapping[str, Any]] = (),
    *,
    now: datetime,
    new_suffix: Callable[[], str],
    nodes: Mapping[str, Mapping[str, Any]] | None = None,
    backoff: BackoffPolicy | None = None,
    objects: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    **options: Any,
) -> ClusterPlan:
    """``plan_cluster`` over a context made of these parts. Host loss is off unless a timeout
    is given (``unready_slice_timeout``), as planning tests without nodes expect."""
    options.setdefault("unready_slice_timeout", 0.0)
    if backoff is not None:
        options.update(
            slice_backoff_base=backoff.base,
            slice_backoff_max=backoff.max,
            slice_backoff_reset=backoff.reset,
        )
    state = ClusterState(
        dump_cluster(spec), pods, services, nodes=nodes or {}, objects=objects or {}
    )
    return plan_cluster(spec, PlanContext(state, now, new_suffix, PlanOptions(**options)))


class Loop:
    """Plans, applies the plan to the world, stores the status, like the controller would."""

    def __init__(
        self,
        spec: RayCluster,
        world: World | None = None,
        *,
        stuck: bool = False,
        **options: Any,
    ) -> None:
        self.cluster = spec
        self.world = world or World()
        self.options = options
        self.suffix = suffixes()
        self.ticks = 0
        #: Plan a day after the world's clock: every terminating pod then looks stuck.
        self.lag = timedelta(days=1) if stuck else timedelta(0)

    def now(self) -> datetime:
        """The world's clock (plus a second per plan, so every plan is later than the last)."""
        return BASE + timedelta(seconds=self.world.clock + self.ticks) + self.lag

    def plan(self) -> ClusterPlan:
        self.ticks += 1
        return plan_for(
            self.cluster,
            self.world.list(),
            self.services(),
            now=self.now(),
            new_suffix=self.suffix,
            **self.options,
        )

    def services(self) -> list[dict[str, Any]]:
        return getattr(self, "_services", [])

    def apply(self, plan: ClusterPlan) -> None:
        self.world.step(
            [d.name for d in plan.deletes], manifests=[c.manifest for c in plan.creates]
        )
        self._services = [dict(s) for s in plan.services]
        self.cluster.status = RayClusterStatus.model_validate(plan.status)

    def settle(self, max_steps: int = 8) -> ClusterPlan:
        """Plan and apply until a plan has nothing to do and nothing is terminating."""
        for _ in range(max_steps):
            plan = self.plan()
            if plan.is_empty and not self.world.terminating():
                return plan
            self.apply(plan)
        raise AssertionError(f"no convergence in {max_steps} steps")

    def respec(self, obj: dict[str, Any]) -> None:
        status = self.cluster.status
        self.cluster = load_cluster(obj)
        self.cluster.status = status
