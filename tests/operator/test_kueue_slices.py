"""Real Kueue (built from the Go module proxy, its release's CRDs, RBAC and webhooks) admits
our RayClusters whole slices at a time, on Kubernetes' own control plane with our operator
running (docs/design.md §8.4; issue #34).

A ClusterQueue holds TPU quota for one v5p 2x2x2 slice (two hosts of four chips). Two
RayClusters of one such slice each, queued on its LocalQueue with kubectl: Kueue suspends both
on create and admits the first; the second stays suspended and none of its pods is ever
created; once the first is deleted its quota comes back and the second runs, whole.
`kubectl get workloads` shows both. A watch on every pod of the namespace from before the
first create proves that no slice ever existed in part. Then a RayCluster of a higher
WorkloadPriorityClass preempts a running one: Kueue suspends the victim, whose slice goes
whole (every pod deleted), and readmits it when the preemptor leaves, its slice back at
index 0; a two-slice victim loses both slices whole and gets both back. A queued RayJob
waits Suspended without a RayCluster behind a running one, then
runs its cluster's slice whole, under one Workload (the RayJob's). Under Topology Aware
Scheduling (a ResourceFlavor naming the dev cluster's `Topology` of GKE's placement labels),
a worker group asking for one sub-block per slice gets each slice's hosts inside one
sub-block, and a slice that fits no domain waits whole, with Kueue's reason. An elastic
RayCluster (Kueue's workload slices) grows by one slice when `replicas` is raised, as Ray's
autoscaler raises it: Kueue admits the new size as a new workload slice and opens the new
slice's gates together; a slice beyond the quota waits gated, whole; scaling down returns a
whole slice's quota."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from devkube.nodes import HOST_LABEL, SUBBLOCK_LABEL
from tests.harness import control_planes
from tests.harness import manifests as m
from tests.harness.examples import EXAMPLES
from tests.harness.kubectl import Run, ok, runner
from tests.harness.kueue import flavor, queue, require_kueue, running_kueue
from tests.harness.objects import Obj
from tests.harness.operator_world import SMALL, SharedWorld, eventually, running_world
from tests.harness.pods import REPLICA_INDEX, is_ready
from tests.rayjob.jobs_api_standin import JobsApiStandIn

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.kubernetes]

NS = "queued"
#: Two slices' worth of TPU hosts: the nodes never hold the second slice back, Kueue does.
NODES = ["tpu:v5p:2x2x2:2", "cpu:2"]
HOSTS = 2
QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"
ELASTIC = "kueue.x-k8s.io/elastic-job"  # the annotation, and the scheduling gate
SLICE_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
TAS_GATE = "kueue.x-k8s.io/topology"
HOSTNAME = "kubernetes.io/hostname"


def kueue_objects() -> list[Obj]:
    """A flavor; ClusterQueues of TPU quota on it, each with its LocalQueue in NS: `team`
    (one slice, 2 hosts x 4 chips, preempting lower priorities), `elastic` (two slices, for
    elastic RayClusters) and `wide` (two slices, preempting); a high WorkloadPriorityClass;
    and the TAS queue."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        flavor("v5p"),
        *queue("team", "tpu-slices", namespace=NS, chips=4 * HOSTS, preempting=True),
        *queue("elastic", "elastic-slices", namespace=NS, chips=2 * 4 * HOSTS),
        *queue("wide", "two-slices", namespace=NS, chips=2 * 4 * HOSTS, preempting=True),
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        },
        *tas_objects(),
    ]


def tas_objects() -> list[Obj]:
    """Topology Aware Scheduling beside the quota above, as examples/kueue/tpu-tas.yaml has
    it (its RayCluster left out, its LocalQueue `tas` moved to NS): a flavor of the TPU nodes
    naming the dev cluster's Topology and a plain one for CPU nodes first (the head), in a
    ClusterQueue of two slices' TPU quota."""
    docs = yaml.safe_load_all((EXAMPLES / "kueue" / "tpu-tas.yaml").read_text())
    out = [d for d in docs if d and d["kind"] != "RayCluster"]
    for doc in out:
        if doc["kind"] == "LocalQueue":
            doc["metadata"]["namespace"] = NS
    return out


def queued_slice(name: str, **labels: str) -> Obj:
    """One v5p 2x2x2 slice and a head, on the LocalQueue."""
    tpu = {**SMALL, "google.com/tpu": "4"}
    worker = m.template(
        m.container("ray-worker", requests=tpu, limits=tpu), nodeSelector=dict(m.V5P_2X2X2)
    )
    head = m.head_group(m.container("ray-head", requests=SMALL))
    group = m.worker_group("tpu", worker, replicas=1, min_replicas=0, max_replicas=1, hosts=HOSTS)
    obj = m.raycluster(name, head, [group], namespace=NS)
    obj["metadata"]["labels"] = {QUEUE: "team", **labels}
    return obj


class PodLog:
    """Every pod of NS the API ever showed (a watch from before the first create): per
    cluster and replica index the pod names added, and every name ever deleted."""

    def __init__(self) -> None:
        self.added: dict[tuple[str, str], set[str]] = {}
        self.deleted: set[str] = set()
        #: Pods seen with Kueue's elastic-job scheduling gate.
        self.gated: set[str] = set()

    def names(self, cluster: str) -> set[str]:
        return {n for (c, _), names in self.added.items() if c == cluster for n in names}

    async def follow(self, world: SharedWorld) -> None:
        async for event in world.cluster.client.list_and_watch(f"/api/v1/namespaces/{NS}/pods"):
            objs = event.object.get("items") or [] if event.type == "SYNC" else [event.object]
            for pod in objs:
                meta = pod["metadata"]
                labels = meta.get("labels") or {}
                if labels.get("ray.io/node-type") == "worker":
                    key = (labels.get("ray.io/cluster", ""), labels.get(REPLICA_INDEX, ""))
                    self.added.setdefault(key, set()).add(meta["name"])
                if event.type == "DELETED" or meta.get("deletionTimestamp"):
                    self.deleted.add(meta["name"])
                if gated(pod):
                    self.gated.add(meta["name"])

    def assert_whole(self) -> None:
        """Each slice ever seen had all its hosts: HOSTS worker names per index, no more
        (a slice re-created after a suspension has new names: a multiple of HOSTS)."""
        for key, names in self.added.items():
            assert len(names) % HOSTS == 0 and names, (key, sorted(names))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def queued(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[SharedWorld, Run, PodLog]]:
    require_kueue()
    async with running_world(
        NODES, world_class=SharedWorld, control_plane=control_planes.KUBERNETES
    ) as world:
        assert isinstance(world, SharedWorld)
        async with running_kueue(world.cluster):
            for obj in kueue_objects():
                await world.cluster.apply(obj)
            await world.start_operator()
            path = world.cluster.write_kubeconfig(tmp_path_factory.mktemp("kueue") / "kc")
            log = PodLog()
            task = asyncio.create_task(log.follow(world))
            try:
                yield world, runner(Path(path)), log
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def jobs_api(queued: tuple[SharedWorld, Run, PodLog]) -> AsyncIterator[JobsApiStandIn]:
    """Ray's Jobs API for the RayJobs of the module (no Ray runs on the simulated runtime):
    the test plays Ray's part, finishing a submitted job."""
    world = queued[0]
    standin = await JobsApiStandIn().start()
    world.operators[-1].manager.rayjobs.resolve = lambda rayjob, cluster: standin.url
    try:
        yield standin
    finally:
        await standin.stop()


async def get(kubectl: Run, *args: str) -> Any:
    return json.loads(await ok(kubectl, "get", *args, "-n", NS, "-o", "json"))


async def workload_of(kubectl: Run, cluster: str) -> Obj:
    for wl in (await get(kubectl, "workloads"))["items"]:
        if any(o["name"] == cluster for o in wl["metadata"].get("ownerReferences", [])):
            result: Obj = wl
            return result
    raise LookupError(f"no Workload owned by RayCluster {cluster} yet")


def condition(obj: Obj, kind: str) -> bool:
    return any(
        c["type"] == kind and c["status"] == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


async def workers_of(world: SharedWorld, name: str) -> list[Obj]:
    """The worker pods of RayCluster NAME in NS."""
    pods = await world.pods(name, NS)
    return [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]


async def running_whole(world: SharedWorld, kubectl: Run, name: str, slices: int = 1) -> None:
    """Admitted, unsuspended, and its SLICES slices Ready: every host, at indices from 0."""

    async def admitted() -> None:
        assert condition(await workload_of(kubectl, name), "Admitted")

    await eventually(admitted, 90, interval=0.3)
    await slice_ready(world, kubectl, name, slices)


async def slice_ready(world: SharedWorld, kubectl: Run, name: str, slices: int = 1) -> None:
    """RayCluster NAME unsuspended and its SLICES slices Ready: every host, at indices from 0."""

    async def check() -> None:
        cluster = await get(kubectl, "raycluster", name)
        assert cluster["spec"].get("suspend") is not True
        workers = await workers_of(world, name)
        assert len(workers) == slices * HOSTS and all(is_ready(p) for p in workers), workers
        indices = {p["metadata"]["labels"][REPLICA_INDEX] for p in workers}
        assert indices == {str(i) for i in range(slices)}, indices

    await eventually(check, 90, interval=0.3)


async def waiting_whole(world: SharedWorld, kubectl: Run, name: str) -> None:
    """Suspended by Kueue, its Workload pending on quota, and (after the operator's pass over
    it as it stands: the barrier) not one pod."""

    async def check() -> None:
        cluster = await get(kubectl, "raycluster", name)
        assert cluster["spec"].get("suspend") is True
        wl = await workload_of(kubectl, name)
        assert not condition(wl, "QuotaReserved"), wl["status"]

    await eventually(check, 60, interval=0.3)
    await world.reconciled(name, NS)
    assert await world.pods(name, NS, live=False) == []


async def test_second_slice_waits_whole_for_the_first(
    queued: tuple[SharedWorld, Run, PodLog],
) -> None:
    world, kubectl, log = queued
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(queued_slice("first")))
    await running_whole(world, kubectl, "first")
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(queued_slice("second")))
    await waiting_whole(world, kubectl, "second")
    listed = await ok(kubectl, "get", "workloads", "-n", NS)
    assert listed.count("raycluster-") == 2, listed
    assert not log.names("second")

    await ok(kubectl, "delete", "raycluster", "first", "-n", NS, "--wait=true")
    await running_whole(world, kubectl, "second")
    log.assert_whole()
    assert not log.names("second") & log.deleted  # created once, never churned
    await ok(kubectl, "delete", "raycluster", "second", "-n", NS, "--wait=true")


async def test_preemption_suspends_the_victim_whole_and_readmits_it(
    queued: tuple[SharedWorld, Run, PodLog],
) -> None:
    world, kubectl, log = queued
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(queued_slice("victim")))
    await running_whole(world, kubectl, "victim")
    first = set(log.names("victim"))

    await ok(
        kubectl, "apply", "-f", "-", input=json.dumps(queued_slice("urgent", **{PRIORITY: "high"}))
    )
    await running_whole(world, kubectl, "urgent")
    victim = await get(kubectl, "raycluster", "victim")
    assert victim["spec"].get("suspend") is True
    assert await world.pods("victim", NS) == []  # the whole slice went, not part of it
    assert first <= log.deleted
    assert condition(await workload_of(kubectl, "victim"), "Evicted")

    await ok(kubectl, "delete", "raycluster", "urgent", "-n", NS, "--wait=true")
    await running_whole(world, kubectl, "victim")  # back at index 0
    log.assert_whole()
    await ok(kubectl, "delete", "raycluster", "victim", "-n", NS, "--wait=true")


async def test_preemption_takes_every_slice_of_a_two_slice_victim_whole(
    queued: tuple[SharedWorld, Run, PodLog],
) -> None:
    world, kubectl, log = queued
    await nodes_empty(world)

    def wide(name: str, **labels: str) -> Obj:
        obj = queued_slice(name, **labels)
        obj["metadata"]["labels"][QUEUE] = "wide"
        obj["spec"]["workerGroupSpecs"][0].update(replicas=2, maxReplicas=2)
        return obj

    await ok(kubectl, "apply", "-f", "-", input=json.dumps(wide("wide-victim")))
    await running_whole(world, kubectl, "wide-victim", slices=2)
    first = set(log.names("wide-victim"))
    assert len(first) == 2 * HOSTS

    urgent = wide("wide-urgent", **{PRIORITY: "high"})
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(urgent))
    await running_whole(world, kubectl, "wide-urgent", slices=2)
    victim = await get(kubectl, "raycluster", "wide-victim")
    assert victim["spec"].get("suspend") is True
    assert await world.pods("wide-victim", NS) == []  # both slices went, every host
    assert first <= log.deleted
    assert condition(await workload_of(kubectl, "wide-victim"), "Evicted")

    await ok(kubectl, "delete", "raycluster", "wide-urgent", "-n", NS, "--wait=true")
    await running_whole(world, kubectl, "wide-victim", slices=2)  # back at indices 0 and 1
    log.assert_whole()
    await ok(kubectl, "delete", "raycluster", "wide-victim", "-n", NS, "--wait=true")


def queued_job(name: str) -> Obj:
    """A RayJob whose cluster is one v5p 2x2x2 slice and a head, on the LocalQueue (Kueue
    asks a queued RayJob to shut its cluster down when it finishes)."""
    cluster = queued_slice(name)
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": NS, "labels": {QUEUE: "team"}},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": cluster["spec"],
        },
    }


async def test_a_queued_rayjob_waits_without_a_cluster_then_runs_whole(
    queued: tuple[SharedWorld, Run, PodLog],
) -> None:
    world, kubectl, log = queued
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(queued_slice("holder")))
    await running_whole(world, kubectl, "holder")
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(queued_job("job")))

    async def job_waits() -> None:
        job = await get(kubectl, "rayjob", "job")
        assert job["spec"].get("suspend") is True
        assert (job.get("status") or {}).get("jobDeploymentStatus") == "Suspended", job
        assert not condition(await workload_of(kubectl, "job"), "QuotaReserved")

    await eventually(job_waits, 60, interval=0.3)
    # One Workload per queued object: the RayJob's, none for a cluster it does not have.
    assert not (await get(kubectl, "rayjob", "job"))["status"].get("rayClusterName")
    names = [c["metadata"]["name"] for c in (await get(kubectl, "rayclusters"))["items"]]
    assert names == ["holder"], names

    await ok(kubectl, "delete", "raycluster", "holder", "-n", NS, "--wait=true")

    async def job_runs() -> str:
        job = await get(kubectl, "rayjob", "job")
        assert condition(await workload_of(kubectl, "job"), "Admitted")
        return str((job.get("status") or {})["rayClusterName"])

    cluster = await eventually(job_runs, 90, interval=0.3)
    await slice_ready(world, kubectl, cluster)
    owners = [
        o["name"] for w in (await get(kubectl, "workloads"))["items"]
        for o in w["metadata"].get("ownerReferences", [])
    ]  # fmt: skip
    assert owners == ["job"], owners
    log.assert_whole()
    await ok(kubectl, "delete", "rayjob", "job", "-n", NS, "--wait=true")


def tas_slices(name: str, replicas: int, level: str) -> Obj:
    """REPLICAS v5p 2x2x2 slices on LocalQueue `tas`, each slice (numOfHosts pods) required
    inside one domain of LEVEL."""
    obj = queued_slice(name)
    obj["metadata"]["labels"] = {QUEUE: "tas"}
    group = obj["spec"]["workerGroupSpecs"][0]
    group.update(replicas=replicas, maxReplicas=replicas)
    group["template"]["metadata"] = {"annotations": {SLICE_TOPOLOGY: level, SLICE_SIZE: str(HOSTS)}}
    return obj


async def nodes_empty(world: SharedWorld) -> None:
    """Until no pod of the earlier tests is left, terminating ones included: TAS counts every
    pod on a node, and a Workload found not to fit is tried again only on a queue event."""

    async def empty() -> None:
        pods = await world.cluster.client.get(f"/api/v1/namespaces/{NS}/pods")
        assert [p["metadata"]["name"] for p in pods["items"]] == []

    await eventually(empty, 60, interval=0.3)


async def test_under_tas_each_slice_lands_in_one_subblock(
    queued: tuple[SharedWorld, Run, PodLog],
) -> None:
    world, kubectl, log = queued
    await nodes_empty(world)
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(tas_slices("tas", 2, SUBBLOCK_LABEL)))

    async def placed() -> list[Obj]:
        assert condition(await workload_of(kubectl, "tas"), "Admitted")
        workers = await workers_of(world, "tas")
        assert len(workers) == 2 * HOSTS and all(is_ready(p) for p in workers), workers
        return workers

    workers = await eventually(placed, 120, interval=0.3)
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in (
        await world.cluster.client.get("/api/v1/nodes"))["items"]}  # fmt: skip
    slices: dict[str, set[str]] = {}
    for pod in workers:
        spec = pod["spec"]
        # Kueue's ungater opened the gate and pinned the pod to the host TAS assigned it.
        assert TAS_GATE not in [g["name"] for g in spec.get("schedulingGates") or []]
        assert spec["nodeSelector"][HOSTNAME] == spec["nodeName"], spec["nodeSelector"]
        index = pod["metadata"]["labels"][REPLICA_INDEX]
        slices.setdefault(index, set()).add(nodes[spec["nodeName"]][SUBBLOCK_LABEL])
    # Each slice's hosts share one sub-block (one slice at a time in Kueue's ungater, rule
    # 13d), and the two slices have one each.
    assert sorted(slices) == ["0", "1"] and all(len(s) == 1 for s in slices.values()), slices
    assert slices["0"] != slices["1"], slices
    log.assert_whole()
    await ok(kubectl, "delete", "raycluster", "tas", "-n", NS, "--wait=true")


async def test_under_tas_a_slice_that_fits_no_domain_waits_whole(
    queued: tuple[SharedWorld, Run, PodLog],
) -> None:
    world, kubectl, log = queued
    # One host holds one 4-chip worker: a slice of two can never fit one host.
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(tas_slices("unfit", 1, HOST_LABEL)))

    async def waits() -> str:
        wl = await workload_of(kubectl, "unfit")
        assert not condition(wl, "QuotaReserved")
        messages = [c.get("message", "") for c in wl["status"]["conditions"]]
        # Kueue's reason, e.g. couldn't assign flavors to pod set tpu: topology "gke-tpu"
        # doesn't allow to fit any of 1 slice(s) (its first try may name the head's flavors
        # instead, until an event of the queue has it try again)
        assert any("couldn't assign flavors" in m for m in messages), wl
        return " ".join(messages)

    why = await eventually(waits, 60, interval=0.3)
    assert (await get(kubectl, "raycluster", "unfit"))["spec"].get("suspend") is True
    await world.reconciled("unfit", NS)
    assert await world.pods("unfit", NS, live=False) == [], why
    assert not log.names("unfit")
    await ok(kubectl, "delete", "raycluster", "unfit", "-n", NS, "--wait=true")


async def deployment(kubectl: Run, job: str) -> Obj:
    status: Obj = (await get(kubectl, "rayjob", job)).get("status") or {}
    return status


async def test_two_rayjobs_over_one_slice_of_quota_run_one_after_the_other(
    queued: tuple[SharedWorld, Run, PodLog], jobs_api: JobsApiStandIn
) -> None:
    world, kubectl, log = queued
    names = ("job-a", "job-b")
    for name in names:
        job = queued_job(name)
        job["spec"]["submissionMode"] = "HTTPMode"  # submitted to the stand-in Jobs API
        await ok(kubectl, "apply", "-f", "-", input=json.dumps(job))

    async def one_runs() -> tuple[str, str]:
        states = {n: (await deployment(kubectl, n)).get("jobDeploymentStatus") for n in names}
        running = [n for n in names if states[n] == "Running"]
        waiting = [n for n in names if states[n] == "Suspended"]
        assert len(running) == 1 and len(waiting) == 1, states
        return running[0], waiting[0]

    first, second = await eventually(one_runs, 120, interval=0.3)
    status = await deployment(kubectl, first)
    await slice_ready(world, kubectl, status["rayClusterName"])
    assert not (await deployment(kubectl, second)).get("rayClusterName")
    assert not condition(await workload_of(kubectl, second), "QuotaReserved")

    jobs_api.finish(status["jobId"], "SUCCEEDED")  # Ray's part: the first job ends

    async def second_runs() -> str:
        done = await deployment(kubectl, first)
        assert done.get("jobDeploymentStatus") == "Complete", done
        assert condition(await workload_of(kubectl, first), "Finished")
        after = await deployment(kubectl, second)
        assert after.get("jobDeploymentStatus") == "Running", after
        return str(after["rayClusterName"])

    cluster = await eventually(second_runs, 120, interval=0.3)
    await slice_ready(world, kubectl, cluster)
    # The first job's cluster went (shutdownAfterJobFinishes) before the second's came.
    assert log.names(status["rayClusterName"]) <= log.deleted
    log.assert_whole()
    for name in names:
        await ok(kubectl, "delete", "rayjob", name, "-n", NS, "--wait=true")


def elastic_slices(name: str, replicas: int) -> Obj:
    """A RayCluster of REPLICAS v5p 2x2x2 slices (at most 3) with Ray's autoscaler, which
    Kueue sizes in workload slices."""
    obj = queued_slice(name)
    obj["metadata"]["labels"] = {QUEUE: "elastic"}
    obj["metadata"]["annotations"] = {ELASTIC: "true"}
    obj["spec"]["enableInTreeAutoscaling"] = True
    obj["spec"]["workerGroupSpecs"][0].update(replicas=replicas, minReplicas=0, maxReplicas=3)
    return obj


async def scale(kubectl: Run, name: str, replicas: int, remove: Sequence[str] = ()) -> None:
    """What Ray's autoscaler writes, by a JSON patch: the group's `replicas` and, to scale
    down, the hosts to remove (`workersToDelete`: with the autoscaler on, the operator removes
    no slice it does not name)."""
    group = "/spec/workerGroupSpecs/0"
    patch: list[Obj] = [{"op": "replace", "path": f"{group}/replicas", "value": replicas}]
    if remove:
        strategy = {"workersToDelete": list(remove)}
        patch.append({"op": "add", "path": f"{group}/scaleStrategy", "value": strategy})
    await ok(kubectl, "patch", "raycluster", name, "-n", NS, "--type=json", "-p", json.dumps(patch))


async def live_workloads(kubectl: Run, cluster: str, *, finished: bool = False) -> list[Obj]:
    """The Workloads of CLUSTER, without those Finished (a replaced workload slice is)."""
    return [
        w
        for w in (await get(kubectl, "workloads"))["items"]
        if any(o["name"] == cluster for o in w["metadata"].get("ownerReferences", []))
        and (finished or not condition(w, "Finished"))
    ]


def gated(pod: Obj) -> bool:
    return ELASTIC in [g["name"] for g in pod["spec"].get("schedulingGates") or []]


async def using(kubectl: Run, chips: int) -> None:
    """Until the elastic ClusterQueue's status counts CHIPS TPU chips in use (Kueue writes it
    after the admission it follows)."""

    async def counted() -> None:
        out = await ok(kubectl, "get", "clusterqueue", "elastic-slices", "-o", "json")
        usage = json.loads(out)["status"]["flavorsUsage"][0]["resources"]
        assert next(r["total"] for r in usage if r["name"] == "google.com/tpu") == str(chips)

    await eventually(counted, 30, interval=0.3)


async def test_an_autoscaler_scale_up_is_admitted_as_a_whole_slice(
    queued: tuple[SharedWorld, Run, PodLog],
) -> None:
    world, kubectl, log = queued
    await nodes_empty(world)
    name = "elastic"
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(elastic_slices(name, 1)))
    await running_whole(world, kubectl, name)
    first = {p["metadata"]["name"] for p in await world.pods(name, NS)}
    loop = asyncio.get_running_loop()

    async def slices_ready(count: int) -> list[Obj]:
        workers = await workers_of(world, name)
        ready = [p for p in workers if is_ready(p)]
        assert len(ready) == count * HOSTS, [(p["metadata"]["name"], p["status"]) for p in workers]
        indices = sorted({p["metadata"]["labels"][REPLICA_INDEX] for p in ready})
        assert indices == [str(i) for i in range(count)], indices
        return workers

    asked = loop.time()
    await scale(kubectl, name, 2)
    await eventually(lambda: slices_ready(2), 120, interval=0.1)
    took = loop.time() - asked
    now = {p["metadata"]["name"] for p in await world.pods(name, NS)}
    assert first <= now  # slice 0 untouched
    # Slice 1's hosts were made behind Kueue's gate, and opened by Kueue once it admitted them.
    assert now - first and now - first <= log.gated, (now - first, log.gated)
    await using(kubectl, 2 * 4 * HOSTS)  # the quota of both slices, counted by Kueue
    # Admitted as Kueue's workload slices: a new Workload of both slices replaced the first.
    (live,) = await live_workloads(kubectl, name)
    assert condition(live, "Admitted")
    counts = {a["name"]: a["count"] for a in live["status"]["admission"]["podSetAssignments"]}
    assert counts["tpu"] == 2 * HOSTS, counts
    owned = await live_workloads(kubectl, name, finished=True)
    replaced = [w for w in owned if w["metadata"]["name"] != live["metadata"]["name"]]
    assert replaced and all(
        any(c.get("reason") == "WorkloadSliceReplaced" for c in w["status"]["conditions"])
        for w in replaced
    ), [w["status"] for w in replaced]

    # A third slice is beyond the quota: its hosts wait gated, both of them, none placed.
    await scale(kubectl, name, 3)

    async def third_waits() -> list[Obj]:
        waiting = [p for p in await world.pods(name, NS) if p["metadata"]["labels"].get(
            REPLICA_INDEX) == "2"]  # fmt: skip
        assert len(waiting) == HOSTS and all(gated(p) for p in waiting), waiting
        assert not any(p["spec"].get("nodeName") for p in waiting)
        return waiting

    waiting = await eventually(third_waits, 60, interval=0.3)

    async def slice_pending() -> None:
        """Kueue's new workload slice (three slices) waits on quota beside the admitted one."""
        live = await live_workloads(kubectl, name)
        admitted = [w for w in live if condition(w, "Admitted")]
        pending = [w for w in live if not condition(w, "QuotaReserved")]
        assert len(admitted) == 1 and len(pending) == 1, [w["status"] for w in live]
        messages = " ".join(c.get("message", "") for c in pending[0]["status"]["conditions"])
        assert "insufficient" in messages, messages

    await eventually(slice_pending, 30, interval=0.3)
    await world.reconciled(name, NS)
    # Still the same two, still gated, after the operator's pass: no churn while it waits.
    still = await third_waits()
    assert {p["metadata"]["name"] for p in still} == {p["metadata"]["name"] for p in waiting}
    await slices_ready(2)

    # Scaled down to one slice as Ray's autoscaler does it, naming the hosts of slices 1 and
    # 2 (the gated one is an instance it asked for): both go whole, the quota comes back.
    # Naming slice 1 alone leaves slice 2, as KubeRay would with its autoscaler on; and then
    # Kueue, its pending workload slice shrunk to one slice and admitted, opens slice 2's gates.
    extra = [p["metadata"]["name"] for p in await world.pods(name, NS) if p["metadata"][
        "labels"].get(REPLICA_INDEX) in ("1", "2")]  # fmt: skip
    await scale(kubectl, name, 1, remove=extra)

    async def back_to_one() -> None:
        workers = await slices_ready(1)
        assert len(workers) == HOSTS, workers

    await eventually(back_to_one, 90, interval=0.3)
    await using(kubectl, 4 * HOSTS)
    assert first <= {p["metadata"]["name"] for p in await world.pods(name, NS)}
    log.assert_whole()
    await ok(kubectl, "delete", "raycluster", name, "-n", NS, "--wait=true")

    # The same step without Kueue: a cluster on no queue, 1 -> 2 slices.
    await nodes_empty(world)
    plain = elastic_slices("plain", 1)
    del plain["metadata"]["labels"][QUEUE], plain["metadata"]["annotations"][ELASTIC]
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(plain))
    await slice_ready(world, kubectl, "plain")
    asked = loop.time()
    await scale(kubectl, "plain", 2)

    async def both_ready() -> None:
        workers = await workers_of(world, "plain")
        assert len(workers) == 2 * HOSTS and all(is_ready(p) for p in workers), workers

    await eventually(both_ready, 60, interval=0.1)
    alone = loop.time() - asked
    print(f"KUEUE-ELASTIC: replicas 1 -> 2 to the second slice Ready: {took:.1f} s under Kueue, "
          f"{alone:.1f} s without")  # fmt: skip
    await ok(kubectl, "delete", "raycluster", "plain", "-n", NS, "--wait=true")
