"""KubeRay's RayJob samples (`ray-operator/config/samples/ray-job.*.yaml`, v1.7), replayed
with kubectl on the simulated runtime. Each is a minimal equivalent written for these tests
from the sample's structure (the fields that make it that sample; small resources, no
ConfigMap of code), driven to its end with the stand-in Jobs API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from rayjob_world import NODES, RayJobWorld, rayjob, tpu_cluster_spec

from tests.harness import manifests as m
from tests.harness.waiting import eventually
from tests.harness.world import open_world

pytestmark = pytest.mark.asyncio(loop_scope="module")
SAMPLE_CODE = "python /home/ray/samples/sample_code.py"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world() -> AsyncIterator[RayJobWorld]:
    async with open_world(RayJobWorld, [*NODES, "tpu:v6e:4x4:1"]) as w:
        yield w


def small_cluster() -> dict[str, Any]:
    """The samples' cluster: a head and one single-host CPU group ("small-group")."""
    head = m.container("ray-head", requests={"cpu": "100m"})
    worker = m.template(m.container("ray-worker", requests={"cpu": "100m"}))
    group = m.worker_group("small-group", worker, replicas=1, min_replicas=1, max_replicas=5)
    return {
        "rayVersion": "2.52.0",
        "headGroupSpec": m.head_group(head),
        "workerGroupSpecs": [group],
    }


def v6e_16_cluster() -> dict[str, Any]:
    """ray-job.tpu-v6e-16-multihost: one v6e 4x4 slice of 4 hosts."""
    spec = tpu_cluster_spec()
    tpu = {"cpu": "100m", "google.com/tpu": "4"}
    pod = m.template(
        m.container("ray-worker", requests=tpu, limits=tpu), nodeSelector=dict(m.V6E_4X4)
    )
    spec["workerGroupSpecs"] = [
        m.worker_group("tpu-group", pod, replicas=1, min_replicas=1, max_replicas=1, hosts=4)
    ]
    return spec


async def run_k8s_job(world: RayJobWorld, ns: str, name: str) -> dict[str, Any]:
    """Play Ray and the submitter: the job is submitted, succeeds, the submitter exits."""
    running = await world.until(ns, name, "Running")
    world.jobs_api.start_job(running["jobId"])
    world.jobs_api.finish(running["jobId"], "SUCCEEDED")
    await world.submitter_ran(ns, name)
    return await world.until(ns, name, "Complete")


def submitter_line(job: dict[str, Any]) -> str:
    container = job["spec"]["template"]["spec"]["containers"][0]
    return " ".join([*container.get("command", []), *container.get("args", [])])


async def test_ray_job_sample(world: RayJobWorld, tmp_path: Path) -> None:
    ns = await world.namespace("sample")
    env = "pip:\n  - requests==2.26.0\nenv_vars:\n  counter_name: test_counter\n"
    job = rayjob(
        "rayjob-sample",
        ns,
        entrypoint=SAMPLE_CODE,
        runtimeEnvYAML=env,
        rayClusterSpec=small_cluster(),
    )
    await world.apply(tmp_path, job)
    final = await run_k8s_job(world, ns, "rayjob-sample")
    assert final["jobStatus"] == "SUCCEEDED"
    submitter = await world.submitter(ns, "rayjob-sample")
    assert submitter is not None
    line = submitter_line(submitter)
    assert "--runtime-env-json" in line and '"counter_name": "test_counter"' in line
    assert line.endswith(
        f"-- {SAMPLE_CODE}; then break; fi; sleep 3; done; ray job logs --address "
        f"http://{final['dashboardURL']} --follow {final['jobId']}"
    )


async def test_ray_job_resources(world: RayJobWorld, tmp_path: Path) -> None:
    ns = await world.namespace("resources")
    job = rayjob(
        "rayjob-resources",
        ns,
        entrypoint=SAMPLE_CODE,
        entrypointNumCpus=2,
        entrypointNumGpus=0.5,
        entrypointResources='{"resource1": 1, "resource2": 2}',
        rayClusterSpec=small_cluster(),
    )
    await world.apply(tmp_path, job)
    await run_k8s_job(world, ns, "rayjob-resources")
    submitter = await world.submitter(ns, "rayjob-resources")
    assert submitter is not None
    line = submitter_line(submitter)
    assert "--entrypoint-num-cpus 2.000000 --entrypoint-num-gpus 0.500000" in line
    assert """--entrypoint-resources '{"resource1": 1, "resource2": 2}'""" in line


async def test_ray_job_shutdown(world: RayJobWorld, tmp_path: Path) -> None:
    ns = await world.namespace("shutdown")
    job = rayjob(
        "rayjob-sample-shutdown",
        ns,
        entrypoint=SAMPLE_CODE,
        shutdownAfterJobFinishes=True,
        ttlSecondsAfterFinished=1,
        rayClusterSpec=small_cluster(),
    )
    await world.apply(tmp_path, job)
    final = await run_k8s_job(world, ns, "rayjob-sample-shutdown")

    async def cluster_gone() -> None:
        assert not await world.cluster_exists(ns, final["rayClusterName"])

    await eventually(cluster_gone, 30)
    assert await world.submitter(ns, "rayjob-sample-shutdown") is not None  # logs stay


async def test_ray_job_light_weight_submitter(world: RayJobWorld, tmp_path: Path) -> None:
    ns = await world.namespace("light")
    template = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "my-custom-rayjob-submitter",
                    "image": "quay.io/kuberay/submitter:v1.5.1",
                    "command": ["/submitter"],
                    "args": [
                        "--runtime-env-json",
                        '{"pip":["emoji"]}',
                        "--",
                        "python",
                        "-c",
                        "print(1)",
                    ],
                }
            ],
        }
    }
    job = rayjob(
        "rayjob-light-weight-submitter",
        ns,
        submitterPodTemplate=template,
        rayClusterSpec=small_cluster(),
    )
    await world.apply(tmp_path, job)
    final = await run_k8s_job(world, ns, "rayjob-light-weight-submitter")
    submitter = await world.submitter(ns, "rayjob-light-weight-submitter")
    assert submitter is not None
    container = submitter["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["/submitter"]  # the user's command is kept
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["RAY_DASHBOARD_ADDRESS"] == final["dashboardURL"]
    assert env["RAY_JOB_SUBMISSION_ID"] == final["jobId"]


async def test_ray_job_use_existing_raycluster(world: RayJobWorld, tmp_path: Path) -> None:
    ns = await world.namespace("existing")
    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "ray-cluster-kuberay", "namespace": ns},
        "spec": small_cluster(),
    }
    job = rayjob(
        "rayjob-use-existing-raycluster",
        ns,
        rayClusterSpec=None,
        entrypoint='python -c "import ray; ray.init(); print(ray.cluster_resources())"',
        clusterSelector={"ray.io/cluster": "ray-cluster-kuberay"},
    )
    await world.apply(tmp_path, cluster, job)
    final = await run_k8s_job(world, ns, "rayjob-use-existing-raycluster")
    assert final["rayClusterName"] == "ray-cluster-kuberay"


async def test_ray_job_interactive_mode(world: RayJobWorld, tmp_path: Path) -> None:
    ns = await world.namespace("interactive-sample")
    job = rayjob(
        "rayjob-interactive-mode",
        ns,
        submissionMode="InteractiveMode",
        jobId="",
        entrypoint=None,
        rayClusterSpec=small_cluster(),
    )
    await world.apply(tmp_path, job)
    await world.until(ns, "rayjob-interactive-mode", "Waiting")
    assert await world.submitter(ns, "rayjob-interactive-mode") is None


async def test_ray_job_deletion_rules(world: RayJobWorld, tmp_path: Path) -> None:
    ns = await world.namespace("rules-sample")
    rules = []
    for status in ("SUCCEEDED", "FAILED"):
        for ttl, policy in ((0, "DeleteWorkers"), (1, "DeleteCluster"), (2, "DeleteSelf")):
            rules.append({"condition": {"jobStatus": status, "ttlSeconds": ttl}, "policy": policy})
    job = rayjob(
        "rayjob-deletion-rules",
        ns,
        deletionStrategy={"deletionRules": rules},
        rayClusterSpec=small_cluster(),
    )
    await world.apply(tmp_path, job)
    final = await run_k8s_job(world, ns, "rayjob-deletion-rules")
    assert final["jobStatus"] == "SUCCEEDED"

    async def self_gone() -> None:
        assert not await world.rayjob_exists(ns, "rayjob-deletion-rules")

    await eventually(self_gone, 30)


async def test_ray_job_tpu_v6e_16_multihost(world: RayJobWorld, tmp_path: Path) -> None:
    ns = await world.namespace("v6e-16")
    job = rayjob(
        "v6e-16-multihost",
        ns,
        entrypoint="python tpu_list_devices.py",
        rayClusterSpec=v6e_16_cluster(),
    )
    await world.apply(tmp_path, job)
    running = await world.until(ns, "v6e-16-multihost", "Running")
    slices = running["rayClusterStatus"]
    assert (slices["readyWorkerSlices"], slices["readyWorkerReplicas"]) == (1, 4)
    world.jobs_api.start_job(running["jobId"])
    world.jobs_api.finish(running["jobId"], "SUCCEEDED")
    await world.submitter_ran(ns, "v6e-16-multihost")
    await world.until(ns, "v6e-16-multihost", "Complete")
