"""How long one plan takes for big multi-host groups, and how it grows.

Run: ``.venv/bin/python benchmarks/planning.py`` (or ``make bench``).

Budget (README): a group of 16k pods (4 hosts per slice) plans in under 250 ms at steady state,
and 4x the pods costs at most 5x the time (no quadratic scans). Two cases are measured apart:
*steady* (every pod exists and is ready: the plan is empty, the common case for a controller)
and *scale-up* (no pods exist: every pod manifest is built, so it measures the builders too).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from raycluster_operator import builders
from raycluster_operator.api import labels
from raycluster_operator.api.models import RayCluster, dump_cluster, load_cluster
from raycluster_operator.api.objects import Obj
from raycluster_operator.planning import (
    ClusterPlan,
    ClusterState,
    PlanContext,
    PlanOptions,
    plan_cluster,
)

HOSTS = 4
SIZES = (1_000, 4_000, 16_000)
BUDGET_MS = 250.0
GROWTH_BUDGET = 5.0
NOW = datetime(2026, 11, 29, tzinfo=UTC)
NO_HOST_LOSS = PlanOptions(unready_slice_timeout=0)


def make_cluster(pods: int) -> RayCluster:
    container = {
        "name": "ray",
        "image": "rayproject/ray:2.60.0",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    return load_cluster(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {"name": "bench", "namespace": "default", "generation": 1},
            "spec": {
                "headGroupSpec": {"template": {"spec": {"containers": [container]}}},
                "workerGroupSpecs": [
                    {
                        "groupName": "slices",
                        "numOfHosts": HOSTS,
                        "replicas": pods // HOSTS,
                        "template": {"spec": {"containers": [container]}},
                    }
                ],
            },
        }
    )


def running(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": manifest["metadata"]["labels"],
            "creationTimestamp": "2026-11-29T00:00:00Z",
        },
        "spec": manifest["spec"],
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def existing_pods(cluster: RayCluster) -> list[dict[str, Any]]:
    """Every pod of the cluster as the cache would hold it, built cheaply (labels only)."""
    group = cluster.spec.worker_group_specs[0]
    pods = [running(builders.build_head_pod(cluster), "bench-head-00000")]
    base = {
        labels.CLUSTER: "bench",
        labels.GROUP: group.group_name,
        labels.NODE_TYPE: labels.NODE_TYPE_WORKER,
    }
    spec = {"containers": [{"name": "ray", "image": "rayproject/ray:2.60.0"}]}
    for r in range(group.replicas or 0):
        for h in range(HOSTS):
            pod_labels = {
                **base,
                labels.REPLICA_INDEX: str(r),
                labels.REPLICA_NAME: f"slices-{r:05d}",
                labels.HOST_INDEX: str(h),
            }
            manifest = {"metadata": {"labels": pod_labels}, "spec": spec}
            pods.append(running(manifest, f"bench-slices-worker-{r}-{h}"))
    return pods


def suffixes() -> Callable[[], str]:
    count = iter(range(10**9))
    return lambda: f"s{next(count):07d}"


def timings_ms(action: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median and fastest of ``runs``: the median is the figure, the fastest shows the noise of
    a shared machine."""
    times = []
    for _ in range(runs):
        gc.collect()  # start each run without garbage left by the previous one
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times)


def plan(cluster: RayCluster, pods: list[Obj], services: list[Obj]) -> ClusterPlan:
    """One plan of ``cluster`` over these pods; no nodes are given, so host loss is off."""
    state = ClusterState(dump_cluster(cluster), pods, services)
    return plan_cluster(cluster, PlanContext(state, NOW, suffixes(), NO_HOST_LOSS))


def main() -> int:
    steady: dict[int, tuple[float, float]] = {}
    scale_up: dict[int, tuple[float, float]] = {}
    for size in SIZES:
        cluster = make_cluster(size)
        pods = existing_pods(cluster)
        services = [builders.build_head_service(cluster), builders.build_headless_service(cluster)]
        check = plan(cluster, pods, services)
        assert check.is_empty, "steady-state benchmark input is not converged"
        steady[size] = timings_ms(lambda c=cluster, p=pods, s=services: plan(c, p, s), runs=9)
        scale_up[size] = timings_ms(lambda c=cluster, s=services: plan(c, [], s), runs=3)
    print(f"{'pods':>8} {'steady ms (min)':>18} {'scale-up ms (min)':>20}")
    for size in SIZES:
        (s_med, s_min), (u_med, u_min) = steady[size], scale_up[size]
        print(f"{size:>8} {s_med:>9.1f} ({s_min:>6.1f}) {u_med:>11.1f} ({u_min:>6.1f})")
    big, mid = SIZES[-1], SIZES[-2]
    growth_steady = steady[big][0] / steady[mid][0]
    growth_up = scale_up[big][0] / scale_up[mid][0]
    print(
        f"growth {mid} -> {big} pods (medians): steady x{growth_steady:.2f}, "
        f"scale-up x{growth_up:.2f}"
    )
    print("scale-up builds every pod manifest (builders); the planning itself is the steady figure")
    ok = steady[big][0] < BUDGET_MS and growth_steady <= GROWTH_BUDGET
    print(
        f"budget: steady {big} pods < {BUDGET_MS:.0f} ms and growth <= x{GROWTH_BUDGET:.0f}: "
        + ("OK" if ok else "OVER")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
