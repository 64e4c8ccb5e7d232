"""batch/v1 Jobs in the dev cluster, driven by the real kubectl: server defaults, pod labels
and owners, completions and parallelism, backoffLimit, activeDeadlineSeconds,
ttlSecondsAfterFinished, suspend, `kubectl wait --for=condition=complete|failed` and `kubectl
logs job/NAME` (docs/design.md §8, "Jobs")."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from devkube import DevCluster
from tests.harness.waiting import eventually

#: One cluster for the module's tests (each Job has a name of its own; docs/design.md §8.1).
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def dev_cluster(module_cluster: DevCluster) -> DevCluster:
    return module_cluster


def job(name: str, command: str, **spec: Any) -> str:
    restart = spec.pop("restartPolicy", "Never")
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            **spec,
            "template": {
                "spec": {
                    "restartPolicy": restart,
                    "containers": [
                        {"name": "main", "image": "busybox", "command": ["sh", "-c", command]}
                    ],
                }
            },
        },
    }
    return yaml.safe_dump(body)


async def get_json(kubectl: Any, *args: str) -> Any:
    answer = await kubectl("get", *args, "-o", "json")
    assert answer.returncode == 0, answer.stderr
    return json.loads(answer.stdout)


async def test_defaults_labels_owner_wait_and_logs(kubectl: Any) -> None:
    assert (await kubectl("apply", "-f", "-", input=job("ok", "exit 0"))).returncode == 0
    waited = await kubectl("wait", "--for=condition=complete", "job/ok", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr
    shown = await get_json(kubectl, "job", "ok")
    spec, uid = shown["spec"], shown["metadata"]["uid"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert (spec["completionMode"], spec["suspend"], spec["manualSelector"]) == (
        "NonIndexed",
        False,
        False,
    )
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    labels = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "ok",
        "controller-uid": uid,
        "job-name": "ok",
    }
    assert spec["template"]["metadata"]["labels"] == labels
    status = shown["status"]
    assert status["succeeded"] == 1 and "active" not in status
    assert status["completionTime"] and status["startTime"]
    kinds = {c["type"]: c["status"] for c in status["conditions"]}
    assert kinds == {"SuccessCriteriaMet": "True", "Complete": "True"}
    (pod,) = (await get_json(kubectl, "pods", "-l", "job-name=ok"))["items"]
    assert pod["metadata"]["name"].startswith("ok-")
    assert labels.items() <= pod["metadata"]["labels"].items()
    (ref,) = pod["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == ("Job", "ok", uid, True)
    assert pod["status"]["phase"] == "Succeeded"
    logs = await kubectl("logs", "job/ok")
    assert logs.returncode == 0, logs.stderr
    table = (await kubectl("get", "jobs")).stdout.splitlines()
    assert table[0].split()[:3] == ["NAME", "STATUS", "COMPLETIONS"]
    # Deleting the Job cascades to its pods.
    assert (await kubectl("delete", "job", "ok", "--wait=true")).returncode == 0

    async def gone() -> None:
        assert (await get_json(kubectl, "pods", "-l", "job-name=ok"))["items"] == []

    await eventually(gone)


async def test_restart_policy_always_is_refused(kubectl: Any) -> None:
    answer = await kubectl("apply", "-f", "-", input=job("bad", "exit 0", restartPolicy="Always"))
    assert answer.returncode != 0
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Always"' in answer.stderr


async def test_backoff_limit_counts_pod_failures(kubectl: Any) -> None:
    manifest = job("failing", "exit 3", backoffLimit=1)
    assert (await kubectl("apply", "-f", "-", input=manifest)).returncode == 0
    waited = await kubectl("wait", "--for=condition=failed", "job/failing", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr
    status = (await get_json(kubectl, "job", "failing"))["status"]
    assert status["failed"] == 2  # backoffLimit 1: the second failure ends it
    reasons = {c["type"]: c["reason"] for c in status["conditions"]}
    assert reasons == {"FailureTarget": "BackoffLimitExceeded", "Failed": "BackoffLimitExceeded"}
    assert "completionTime" not in status
    pods = (await get_json(kubectl, "pods", "-l", "job-name=failing"))["items"]
    assert [p["status"]["phase"] for p in pods] == ["Failed", "Failed"]


async def test_completions_and_parallelism(kubectl: Any) -> None:
    manifest = job("many", "exit 0", completions=3, parallelism=2)
    assert (await kubectl("apply", "-f", "-", input=manifest)).returncode == 0
    waited = await kubectl("wait", "--for=condition=complete", "job/many", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr
    assert (await get_json(kubectl, "job", "many"))["status"]["succeeded"] == 3
    pods = (await get_json(kubectl, "pods", "-l", "job-name=many"))["items"]
    assert len(pods) == 3


async def test_active_deadline_fails_a_running_job(kubectl: Any) -> None:
    manifest = job("slow", "sleep 1000", activeDeadlineSeconds=1)
    assert (await kubectl("apply", "-f", "-", input=manifest)).returncode == 0
    waited = await kubectl("wait", "--for=condition=failed", "job/slow", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr
    status = (await get_json(kubectl, "job", "slow"))["status"]
    assert {c["type"]: c["reason"] for c in status["conditions"]}["Failed"] == "DeadlineExceeded"

    async def no_active_pod() -> None:
        pods = (await get_json(kubectl, "pods", "-l", "job-name=slow"))["items"]
        assert pods == [] or all(p["status"]["phase"] != "Running" for p in pods)

    await eventually(no_active_pod)


async def test_ttl_after_finished_deletes_the_job(kubectl: Any) -> None:
    manifest = job("brief", "exit 0", ttlSecondsAfterFinished=1)
    assert (await kubectl("apply", "-f", "-", input=manifest)).returncode == 0
    waited = await kubectl("wait", "--for=delete", "job/brief", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr

    async def pods_gone() -> None:
        assert (await get_json(kubectl, "pods", "-l", "job-name=brief"))["items"] == []

    await eventually(pods_gone)


async def test_suspend_deletes_pods_and_resume_runs_again(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    assert (await kubectl("apply", "-f", "-", input=job("held", "sleep 1000"))).returncode == 0

    async def running() -> None:
        assert (await get_json(kubectl, "job", "held"))["status"].get("active") == 1

    await eventually(running)
    patch = '{"spec":{"suspend":true}}'
    assert (await kubectl("patch", "job", "held", "-p", patch)).returncode == 0
    waited = await kubectl("wait", "--for=condition=suspended", "job/held", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr

    async def no_pods() -> None:
        pods = (await get_json(kubectl, "pods", "-l", "job-name=held"))["items"]
        assert pods == []

    await eventually(no_pods)
    patch = '{"spec":{"suspend":false}}'
    assert (await kubectl("patch", "job", "held", "-p", patch)).returncode == 0
    await eventually(running)
