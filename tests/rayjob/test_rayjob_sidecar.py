"""RayJob ``submissionMode: SidecarMode`` on the simulated runtime, driven with the real
kubectl (docs/design.md §11, its 11d): the submitter is a container of the head pod, as
KubeRay v1.7 builds it, and its exit ends the job. A stand-in answers the Jobs API and the
test plays the container's exit (no Ray runs here; tests/e2e/test_rayjob_quickstart.py runs
the same manifest on real Ray)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from rayjob_world import NODES, RayJobWorld, as_yaml, rayjob

from raycluster_operator.kube import BATCH_JOBS, PODS, RAYCLUSTERS
from tests.harness.waiting import eventually
from tests.harness.world import open_world

pytestmark = pytest.mark.asyncio(loop_scope="module")
SUBMITTER = "ray-job-submitter"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world() -> AsyncIterator[RayJobWorld]:
    async with open_world(RayJobWorld, NODES) as w:
        yield w


async def head_pod(world: RayJobWorld, ns: str, cluster: str) -> dict[str, Any]:
    selector = f"ray.io/cluster={cluster},ray.io/node-type=head"
    (head,) = (await world.kube.list(PODS, ns, label_selector=selector)).items
    return dict(head)


async def test_the_head_submits_and_the_submitters_exit_ends_the_job(
    world: RayJobWorld, tmp_path: Path
) -> None:
    ns = await world.namespace("sidecar")
    kubectl = world.kubectl(tmp_path)
    manifest = rayjob(
        "side",
        ns,
        submissionMode="SidecarMode",
        entrypointNumCpus=1,
        runtimeEnvYAML="env_vars:\n  A: b\n",
    )
    done = await kubectl("apply", "-f", "-", input=as_yaml(manifest))
    assert done.returncode == 0, done.stderr
    running = await world.until(ns, "side", "Running")
    job_id, cluster = running["jobId"], running["rayClusterName"]
    assert running["dashboardURL"] == f"{cluster}-head-svc.{ns}.svc.cluster.local:8265"

    # The cluster's head template carries the submitter, as KubeRay v1.7 builds it.
    got = await kubectl("get", "raycluster", cluster, "-n", ns, "-o", "json")
    stored = json.loads(got.stdout)
    assert stored["metadata"]["annotations"]["ray.io/disable-provisioned-head-restart"] == "true"
    template = stored["spec"]["headGroupSpec"]["template"]["spec"]
    assert template["restartPolicy"] == "Never"
    ray_head, submitter = template["containers"]
    assert submitter["name"] == SUBMITTER and submitter["image"] == ray_head["image"]
    assert submitter["command"] == ["/bin/bash", "-ce", "--"]
    (line,) = submitter["args"]
    assert "http://localhost:8265/api/gcs_healthz" in line
    assert "ray job submit --address http://127.0.0.1:8265 --runtime-env-json" in line
    assert f"--submission-id {job_id} --entrypoint-num-cpus 1.000000 --" in line
    assert "--no-wait" not in line and "ray job logs" not in line
    env = {e["name"]: e["value"] for e in submitter["env"]}
    assert env == {
        "PYTHONUNBUFFERED": "1",
        "RAY_DASHBOARD_ADDRESS": running["dashboardURL"],
        "RAY_JOB_SUBMISSION_ID": job_id,
    }
    assert submitter["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    # No submitter Job: the head pod runs the submitter.
    assert (await world.kube.list(BATCH_JOBS, ns)).items == []
    head = await head_pod(world, ns, cluster)
    assert [c["name"] for c in head["spec"]["containers"]][-1] == SUBMITTER

    # The Ray job ends, but the RayJob follows the submitter: Running until it exits.
    world.jobs_api.start_job(job_id)
    world.jobs_api.finish(job_id, "SUCCEEDED")

    async def succeeded_seen() -> None:
        assert (await world.status(ns, "side")).get("jobStatus") == "SUCCEEDED"

    await eventually(succeeded_seen, 30)
    assert (await world.status(ns, "side"))["jobDeploymentStatus"] == "Running"
    await world.cluster.fail_pod(ns, head["metadata"]["name"], 0, container=SUBMITTER)
    final = await world.until(ns, "side", "Complete")
    assert final["jobStatus"] == "SUCCEEDED" and (final["succeeded"], final["failed"]) == (1, 0)
    # The head's Ray container runs on: the cluster is not broken by the submitter's end.
    head_now = await head_pod(world, ns, cluster)
    assert head_now["metadata"]["uid"] == head["metadata"]["uid"]
    assert head_now["status"]["phase"] == "Running"


async def test_a_submitter_that_fails_fails_the_job(world: RayJobWorld, tmp_path: Path) -> None:
    ns = await world.namespace("sidecar-fail")
    await world.apply(tmp_path, rayjob("bad", ns, submissionMode="SidecarMode"))
    running = await world.until(ns, "bad", "Running")
    head = await head_pod(world, ns, running["rayClusterName"])
    # The Jobs API never heard of the job: the submission itself failed.
    await world.cluster.fail_pod(ns, head["metadata"]["name"], 1, container=SUBMITTER)
    final = await world.until(ns, "bad", "Failed")
    assert final["reason"] == "SubmissionFailed"
    assert final["message"].startswith(
        f"Ray head pod container {SUBMITTER} terminated with exit code 1"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"submitterConfig": {"backoffLimit": 1}}, "SidecarMode doesn't support SubmitterConfig"),
        (
            {"submitterPodTemplate": {"spec": {"containers": [{"name": "s", "image": "i"}]}}},
            "SidecarMode doesn't support SubmitterPodTemplate",
        ),
        ({"sliceFailurePolicy": "Resubmit"}, "cannot be used with SidecarMode"),
    ],
)
async def test_what_sidecar_mode_cannot_run_is_a_validation_failure(
    world: RayJobWorld, tmp_path: Path, extra: dict[str, Any], message: str
) -> None:
    ns = await world.namespace(f"sidecar-invalid-{len(message)}")
    await world.apply(tmp_path, rayjob("nope", ns, submissionMode="SidecarMode", **extra))
    final = await world.until(ns, "nope", "ValidationFailed")
    assert message in final["message"]
    assert (await world.kube.list(RAYCLUSTERS, ns)).items == []
