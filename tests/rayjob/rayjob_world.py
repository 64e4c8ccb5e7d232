"""A dev cluster (simulated runtime) with both CRDs, the operator acting as its ServiceAccount,
and a stand-in Jobs API on 127.0.0.1 that the operator's resolver points at (no Ray runs on
the simulated runtime). One world per module; each test uses its own namespace."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml
from jobs_api_standin import JobsApiStandIn

from raycluster_operator.controller.rayjob.reconciler import RayJobReconciler
from raycluster_operator.kube import BATCH_JOBS, PODS, RAYCLUSTERS, RAYJOBS, NotFound
from tests.harness import manifests as m
from tests.harness.kubectl import Run, runner
from tests.harness.objects import Obj
from tests.harness.operator import RunningOperator
from tests.harness.waiting import eventually
from tests.harness.world import DevWorld

NODES = ["tpu:v5p:2x2x2:6", "cpu:4"]
SMALL = {"cpu": "100m", "memory": "128Mi"}
TIMINGS: dict[str, Any] = dict(
    watch_timeout=30,
    retry_base_delay=0.02,
    retry_max_delay=1.0,
    resync_period=30.0,
    identity="rayjob-test-operator",
    rayjob_poll_interval=0.2,
)


@dataclass
class RayJobWorld(DevWorld):
    operator_defaults: ClassVar[dict[str, Any]] = TIMINGS
    jobs_api: JobsApiStandIn = field(default_factory=JobsApiStandIn)

    async def opened(self) -> None:
        await self.jobs_api.start()
        await self.operator_on_standin()

    async def operator_on_standin(self) -> RunningOperator:
        """An operator whose RayJob controller asks the stand-in Jobs API."""
        op = await self.start_operator()
        controller: RayJobReconciler = op.manager.rayjobs
        controller.resolve = lambda rayjob, cluster: self.jobs_api.url
        return op

    async def restart(self) -> RunningOperator:
        """Crash the running operator (no drain: caches and writes in flight lost) and start
        a fresh one, as a killed pod is replaced."""
        await next(o for o in reversed(self.operators) if not o.task.done()).crash()
        return await self.operator_on_standin()

    async def close(self) -> None:
        await super().close()
        await self.jobs_api.stop()

    def kubectl(self, tmp: Path) -> Run:
        return runner(self.cluster.write_kubeconfig(tmp / "kubeconfig"))

    async def apply(self, tmp: Path, *objs: Mapping[str, Any]) -> None:
        """``kubectl apply -f -`` of the objects, as a user applies a manifest."""
        done = await self.kubectl(tmp)("apply", "-f", "-", input=as_yaml(*objs))
        assert done.returncode == 0, done.stderr

    async def namespace(self, name: str) -> str:
        await self.cluster.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
        return name

    async def rayjob(self, ns: str, name: str) -> Obj:
        got: Obj = await self.kube.get(RAYJOBS, ns, name)
        return got

    async def rayjob_exists(self, ns: str, name: str) -> bool:
        try:
            await self.rayjob(ns, name)
        except NotFound:
            return False
        return True

    async def status(self, ns: str, name: str) -> Obj:
        return dict((await self.rayjob(ns, name)).get("status") or {})

    async def until(self, ns: str, name: str, deployment: str, within: float = 60) -> Obj:
        """The status once jobDeploymentStatus is `deployment`."""
        seen: Obj = {}

        async def reached() -> None:
            seen.clear()
            seen.update(await self.status(ns, name))
            assert seen.get("jobDeploymentStatus") == deployment, seen

        await eventually(reached, within)
        return seen

    async def cluster_exists(self, ns: str, name: str) -> bool:
        try:
            await self.kube.get(RAYCLUSTERS, ns, name)
        except NotFound:
            return False
        return True

    async def submitter(self, ns: str, name: str) -> Obj | None:
        try:
            found: Obj = await self.kube.get(BATCH_JOBS, ns, name)
        except NotFound:
            return None
        return found

    async def submitter_ran(self, ns: str, name: str, exit_code: int = 0) -> None:
        """Play the submitter pod: it exits (0: `ray job logs --follow` saw the job end). The
        pod of the Job as it is now, not one of an earlier attempt's Job still terminating."""

        async def pod() -> str:
            job = await self.submitter(ns, name)
            assert job is not None, "no submitter Job"
            selector = f"batch.kubernetes.io/controller-uid={job['metadata']['uid']}"
            listing = await self.kube.list(PODS, ns, label_selector=selector)
            live = [p for p in listing.items if p["status"].get("phase") == "Running"]
            assert live, "no running submitter pod"
            return str(live[0]["metadata"]["name"])

        names: list[str] = []

        async def found() -> None:
            names.append(await pod())

        await eventually(found, 60)
        await self.cluster.fail_pod(ns, names[-1], exit_code)

    async def workers(self, ns: str, cluster: str) -> list[Obj]:
        """The cluster's worker pods, from the API server."""
        selector = f"ray.io/cluster={cluster},ray.io/node-type=worker"
        return list((await self.kube.list(PODS, ns, label_selector=selector)).items)

    def workers_at_submission(self, ns: str, cluster: str) -> dict[str, list[Obj]]:
        """Submission id -> the cluster's worker pods (from the API server) at the moment the
        operator submitted it: what a job landed on, whatever the RayJob's status says."""
        seen: dict[str, list[Obj]] = {}

        async def snapshot(body: dict[str, Any]) -> None:
            seen[str(body.get("submission_id"))] = await self.workers(ns, cluster)

        self.jobs_api.on_submit = snapshot
        return seen

    async def events(self, ns: str, name: str) -> list[Obj]:
        listing = await self.cluster.client.list(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")
        return [e for e in listing.get("items") or [] if e["regarding"]["name"] == name]


def tpu_cluster_spec(replicas: int = 1) -> Obj:
    """One head and one group of 2-host v5p slices."""
    head = m.container(
        "ray-head", requests=SMALL, ports=[{"name": "dashboard", "containerPort": 8265}]
    )
    tpu = {**SMALL, "google.com/tpu": "4"}
    worker = m.container("ray-worker", requests=tpu, limits=tpu)
    pod = m.template(worker, nodeSelector=dict(m.V5P_2X2X2))
    group = m.worker_group("tpu", pod, replicas=replicas, min_replicas=0, max_replicas=4, hosts=2)
    return {
        "rayVersion": m.RAY_VERSION,
        "headGroupSpec": m.head_group(head),
        "workerGroupSpecs": [group],
    }


def rayjob(name: str, ns: str, **spec: Any) -> Obj:
    body: Obj = {"entrypoint": "python -c 'print(1)'", "rayClusterSpec": tpu_cluster_spec()}
    body.update(spec)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {k: v for k, v in body.items() if v is not None},
    }


def assert_healed(pods: list[Obj], broken: set[str], hosts: int = 2) -> None:
    """A whole slice of new pods, every host running and ready, nothing terminating: none of
    the pods in ``broken`` (uids of the slice before it broke)."""
    assert len(pods) == hosts, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        assert pod["metadata"]["uid"] not in broken, pod["metadata"]["name"]
        assert not pod["metadata"].get("deletionTimestamp"), pod["metadata"]["name"]
        assert pod["status"].get("phase") == "Running", pod["status"]
        ready = [c for c in pod["status"].get("conditions") or [] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", pod["status"]


def as_yaml(*objs: Mapping[str, Any]) -> str:
    return yaml.safe_dump_all([dict(o) for o in objs])
