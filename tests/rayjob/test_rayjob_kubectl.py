"""RayJobs on the simulated runtime, driven with the real kubectl; a stand-in answers the Jobs
API where no Ray runs (docs/design.md §11)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from rayjob_world import NODES, RayJobWorld, as_yaml, rayjob

from tests.harness import control_planes
from tests.harness.waiting import eventually
from tests.harness.world import open_world

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.control_planes]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(control_plane: str) -> AsyncIterator[RayJobWorld]:
    control_planes.require(control_plane)
    async with open_world(RayJobWorld, NODES, control_plane=control_plane) as w:
        yield w


async def test_k8s_job_mode_runs_to_complete(world: RayJobWorld, tmp_path: Path) -> None:
    ns = await world.namespace("k8sjob")
    kubectl = world.kubectl(tmp_path)
    done = await kubectl("apply", "-f", "-", input=as_yaml(rayjob("pi", ns)))
    assert done.returncode == 0, done.stderr
    running = await world.until(ns, "pi", "Running")
    job_id, cluster = running["jobId"], running["rayClusterName"]
    assert job_id.startswith("pi-") and cluster.startswith("pi-")
    assert running["dashboardURL"] == f"{cluster}-head-svc.{ns}.svc.cluster.local:8265"
    # Submitted only once every worker slice was ready.
    cluster_status = running["rayClusterStatus"]
    assert cluster_status["readyWorkerSlices"] == cluster_status["desiredWorkerSlices"] == 1
    submitter = await world.submitter(ns, "pi")
    assert submitter is not None
    (ref,) = submitter["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"]) == ("RayJob", "pi")
    assert submitter["spec"]["backoffLimit"] == 2
    line = submitter["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert f"--submission-id {job_id}" in line and "ray job submit" in line
    # Ray's part: the submitter submitted, the job ran and succeeded, the submitter exited.
    world.jobs_api.start_job(job_id)
    await eventually(lambda: _status_is(world, ns, "pi", "RUNNING"), 30)
    world.jobs_api.finish(job_id, "SUCCEEDED")
    await world.submitter_ran(ns, "pi")
    final = await world.until(ns, "pi", "Complete")
    assert final["jobStatus"] == "SUCCEEDED"
    assert (final["succeeded"], final["failed"]) == (1, 0)
    assert final["endTime"] and final["startTime"] and final["rayJobInfo"]["startTime"]
    table = (await kubectl("get", "rayjob", "pi", "-n", ns)).stdout.splitlines()
    assert table[0].split()[:5] == ["NAME", "JOB", "STATUS", "DEPLOYMENT", "STATUS"]
    assert table[1].split()[1:4] == ["SUCCEEDED", "Complete", cluster]
    waited = await kubectl("wait", "-n", ns, "--for=condition=complete", "job/pi", "--timeout=30s")
    assert waited.returncode == 0, waited.stderr
    reasons = [e["reason"] for e in await world.events(ns, "pi")]
    for reason in ("Initialized", "CreatedRayCluster", "ClusterReady", "JobEnded"):
        assert reason in reasons, reasons
    # No deletion policy: the cluster stays.
    assert await world.cluster_exists(ns, cluster)
    registry = world.operators[0].manager.metrics.registry
    moved = registry.get_sample_value(
        "raycluster_operator_rayjob_transitions_total",
        {"source": "Running", "target": "Complete", "cause": "JobEnded"},
    )
    assert moved is not None and moved >= 1


async def _status_is(world: RayJobWorld, ns: str, name: str, job_status: str) -> None:
    assert (await world.status(ns, name)).get("jobStatus") == job_status


async def test_http_mode_submits_through_the_jobs_api(world: RayJobWorld, tmp_path: Path) -> None:
    ns = await world.namespace("httpmode")
    manifest = rayjob(
        "web",
        ns,
        submissionMode="HTTPMode",
        entrypointNumCpus=1.5,
        metadata={"team": "tpu"},
        runtimeEnvYAML="env_vars:\n  A: b\n",
        shutdownAfterJobFinishes=True,
        ttlSecondsAfterFinished=0,
    )
    await world.apply(tmp_path, manifest)
    running = await world.until(ns, "web", "Running")
    job_id = running["jobId"]

    async def submitted() -> None:
        assert [s["submission_id"] for s in world.jobs_api.submissions] == [job_id]

    await eventually(submitted, 30)
    (body,) = world.jobs_api.submissions
    assert body["entrypoint"] == "python -c 'print(1)'"
    assert body["entrypoint_num_cpus"] == 1.5 and body["metadata"] == {"team": "tpu"}
    assert body["runtime_env"] == {"env_vars": {"A": "b"}}
    assert await world.submitter(ns, "web") is None  # HTTPMode: no submitter Job
    world.jobs_api.finish(job_id, "FAILED", "boom")
    final = await world.until(ns, "web", "Failed")
    assert (final["reason"], final["jobStatus"], final["failed"]) == ("AppFailed", "FAILED", 1)

    async def cluster_gone() -> None:
        assert not await world.cluster_exists(ns, running["rayClusterName"])

    await eventually(cluster_gone, 30)


async def test_interactive_mode_waits_for_the_users_job_id(
    world: RayJobWorld, tmp_path: Path
) -> None:
    ns = await world.namespace("interactive")
    kubectl = world.kubectl(tmp_path)
    manifest = rayjob("mine", ns, submissionMode="InteractiveMode", entrypoint=None)
    assert (await kubectl("apply", "-f", "-", input=as_yaml(manifest))).returncode == 0
    waiting = await world.until(ns, "mine", "Waiting")
    assert "jobId" not in waiting
    world.jobs_api.start_job("my-own-id")
    patch = '{"spec":{"jobId":"my-own-id"}}'
    assert (
        await kubectl("patch", "rayjob", "mine", "-n", ns, "--type=merge", "-p", patch)
    ).returncode == 0
    running = await world.until(ns, "mine", "Running")
    assert running["jobId"] == "my-own-id"
    world.jobs_api.finish("my-own-id", "SUCCEEDED")
    assert (await world.until(ns, "mine", "Complete"))["jobStatus"] == "SUCCEEDED"


async def test_kuberays_cel_rules_refuse_what_kube_apiserver_refuses(
    world: RayJobWorld, tmp_path: Path
) -> None:
    """The RayJob CRD's CEL rules (KubeRay's, written into ours) are enforced by the dev
    cluster as kube-apiserver enforces them: kubectl is refused with the rule's message."""
    ns = await world.namespace("cel")
    kubectl = world.kubectl(tmp_path)
    legacy = {"policy": "DeleteCluster"}
    rule = {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED"}}
    both = {"onSuccess": legacy, "onFailure": legacy, "deletionRules": [rule]}
    half = {"onSuccess": legacy}
    bad_condition = {"policy": "DeleteCluster", "condition": {"ttlSeconds": 1}}
    refused = {
        "both": ({"deletionStrategy": both}, "cannot be used together"),
        "half": ({"deletionStrategy": half}, "requires either BOTH onSuccess and onFailure"),
        "cond": (
            {"deletionStrategy": {"deletionRules": [bad_condition]}},
            "requires either the JobStatus or the JobDeploymentStatus",
        ),
        "owner": ({"managedBy": "someone-else"}, "the managedBy field value must be"),
    }
    for name, (spec, message) in refused.items():
        done = await kubectl("apply", "-f", "-", input=as_yaml(rayjob(name, ns, **spec)))
        assert done.returncode != 0 and message in done.stderr, (name, done.stderr)
        assert not await world.rayjob_exists(ns, name)
    kept = rayjob("kept", ns, managedBy="kueue.x-k8s.io/multikueue")
    await world.apply(tmp_path, kept)
    patch = '{"spec":{"managedBy":"ray.io/kuberay-operator"}}'
    done = await kubectl("patch", "rayjob", "kept", "-n", ns, "--type=merge", "-p", patch)
    assert done.returncode != 0 and "the managedBy field is immutable" in done.stderr
