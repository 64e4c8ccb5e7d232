"""batch/v1 Jobs in the dev cluster, driven by the real kubectl: server defaults, pod labels
and owners, completions and parallelism, backoffLimit and the failure backoff, deleted pods
counted as failures, Indexed completion, podFailurePolicy, activeDeadlineSeconds,
ttlSecondsAfterFinished, suspend and resume, `kubectl wait --for=condition=complete|failed`
and `kubectl logs job/NAME` (docs/design.md §8, "Jobs").

The module's cluster replaces a failed pod after 2 s (doubling) instead of kube's 10 s: the
`job_backoff` knob, kube's DefaultJobPodFailureBackOff, which its own tests shorten too."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest
import pytest_asyncio
import yaml

from devkube import DevCluster
from tests.harness.cluster import running_cluster
from tests.harness.waiting import eventually

#: One cluster for the module's tests (each Job has a name of its own; docs/design.md §8.1).
pytestmark = pytest.mark.asyncio(loop_scope="module")
#: The first delay before a failed pod is replaced (kube: 10 s).
BACKOFF = 2.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def jobs_cluster() -> AsyncIterator[DevCluster]:
    """`module_cluster` with a shorter failure backoff (kube's 10 s would make these tests
    wait minutes)."""
    async with running_cluster(kubelet_delay=0.2, job_backoff=(BACKOFF, 600.0)) as cluster:
        yield cluster


@pytest.fixture
def dev_cluster(jobs_cluster: DevCluster) -> DevCluster:
    return jobs_cluster


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


def stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_backoff_limit_counts_pod_failures_replaced_after_a_growing_backoff(
    kubectl: Any,
) -> None:
    """Each failed pod is replaced only after the backoff: BACKOFF, then twice that (kube's
    10 s, 20 s, ... at most 10 min). Timestamps are whole seconds, hence the second off."""
    manifest = job("failing", "exit 3", backoffLimit=2)
    assert (await kubectl("apply", "-f", "-", input=manifest)).returncode == 0
    waited = await kubectl("wait", "--for=condition=failed", "job/failing", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr
    status = (await get_json(kubectl, "job", "failing"))["status"]
    assert status["failed"] == 3  # backoffLimit 2: the third failure ends it
    reasons = {c["type"]: c["reason"] for c in status["conditions"]}
    assert reasons == {"FailureTarget": "BackoffLimitExceeded", "Failed": "BackoffLimitExceeded"}
    assert "completionTime" not in status
    pods = (await get_json(kubectl, "pods", "-l", "job-name=failing"))["items"]
    assert [p["status"]["phase"] for p in pods] == ["Failed"] * 3
    pods.sort(key=lambda p: p["metadata"]["creationTimestamp"])
    ended = [
        stamp(p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"])
        for p in pods
    ]
    created = [stamp(p["metadata"]["creationTimestamp"]) for p in pods]
    assert (created[1] - ended[0]).total_seconds() >= BACKOFF - 1
    assert (created[2] - ended[1]).total_seconds() >= 2 * BACKOFF - 1


async def test_a_running_pod_deleted_counts_as_a_failure(kubectl: Any) -> None:
    """kube counts a pod deleted before it succeeded against backoffLimit (podReplacementPolicy
    TerminatingOrFailed, no podFailurePolicy)."""
    manifest = job("deleted", "sleep 1000", backoffLimit=0)
    assert (await kubectl("apply", "-f", "-", input=manifest)).returncode == 0

    async def running() -> str:
        (pod,) = (await get_json(kubectl, "pods", "-l", "job-name=deleted"))["items"]
        assert pod["status"]["phase"] == "Running"
        return str(pod["metadata"]["name"])

    name = await eventually(running)
    assert (await kubectl("delete", "pod", name, "--wait=false")).returncode == 0
    waited = await kubectl("wait", "--for=condition=failed", "job/deleted", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr
    status = (await get_json(kubectl, "job", "deleted"))["status"]
    assert status["failed"] == 1
    assert {c["type"]: c["reason"] for c in status["conditions"]}["Failed"] == (
        "BackoffLimitExceeded"
    )


async def test_indexed_completion(kubectl: Any) -> None:
    manifest = job("idx", "exit 0", completions=3, parallelism=3, completionMode="Indexed")
    assert (await kubectl("apply", "-f", "-", input=manifest)).returncode == 0
    waited = await kubectl("wait", "--for=condition=complete", "job/idx", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr
    status = (await get_json(kubectl, "job", "idx"))["status"]
    assert (status["succeeded"], status["completedIndexes"]) == (3, "0-2")
    pods = (await get_json(kubectl, "pods", "-l", "job-name=idx"))["items"]
    key = "batch.kubernetes.io/job-completion-index"
    seen = set()
    for pod in pods:
        index = pod["metadata"]["annotations"][key]
        seen.add(index)
        assert pod["metadata"]["labels"][key] == index
        assert pod["metadata"]["name"].startswith(f"idx-{index}-")
        assert pod["spec"]["hostname"] == f"idx-{index}"
        (env,) = pod["spec"]["containers"][0]["env"]
        assert env["name"] == "JOB_COMPLETION_INDEX"
        assert env["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.labels['{key}']"
    assert seen == {"0", "1", "2"}
    answer = await kubectl(
        "apply", "-f", "-", input=job("idx2", "exit 0", parallelism=2, completionMode="Indexed")
    )
    assert answer.returncode != 0
    assert "spec.completions: Required value: when completion mode is Indexed" in answer.stderr


def exit_rule(action: str, *codes: int) -> dict[str, Any]:
    return {"action": action, "onExitCodes": {"operator": "In", "values": list(codes)}}


async def test_pod_failure_policy_fail_job_and_ignore(kubectl: Any) -> None:
    policy = {"rules": [exit_rule("FailJob", 42), exit_rule("Ignore", 3)]}
    manifest = job("fatal", "exit 42", backoffLimit=6, podFailurePolicy=policy)
    assert (await kubectl("apply", "-f", "-", input=manifest)).returncode == 0
    waited = await kubectl("wait", "--for=condition=failed", "job/fatal", "--timeout=60s")
    assert waited.returncode == 0, waited.stderr
    shown = await get_json(kubectl, "job", "fatal")
    assert shown["spec"]["podReplacementPolicy"] == "Failed"
    (pod,) = (await get_json(kubectl, "pods", "-l", "job-name=fatal"))["items"]
    failed = {c["type"]: c for c in shown["status"]["conditions"]}["Failed"]
    assert failed["reason"] == "PodFailurePolicy"
    assert failed["message"] == (
        f"Container main for pod {pod['metadata']['namespace']}/{pod['metadata']['name']} "
        "failed with exit code 42 matching FailJob rule at index 0"
    )
    # Ignored failures do not count: backoffLimit 0 and the Job still runs its second pod.
    manifest = job("ignored", "exit 3", backoffLimit=0, podFailurePolicy=policy)
    assert (await kubectl("apply", "-f", "-", input=manifest)).returncode == 0

    async def two_failed_pods() -> None:
        pods = (await get_json(kubectl, "pods", "-l", "job-name=ignored"))["items"]
        assert [p["status"]["phase"] for p in pods].count("Failed") >= 2

    await eventually(two_failed_pods)
    status = (await get_json(kubectl, "job", "ignored"))["status"]
    assert "failed" not in status
    assert "Failed" not in {c["type"] for c in status.get("conditions") or []}


async def test_what_is_not_run_is_refused(kubectl: Any) -> None:
    """kube's validation of a pod failure policy, and a clear refusal of what the dev cluster's
    Job controller does not run (never run silently as something else)."""
    on_failure = job(
        "pfp",
        "exit 1",
        restartPolicy="OnFailure",
        podFailurePolicy={"rules": [exit_rule("Count", 1)]},
    )
    answer = await kubectl("apply", "-f", "-", input=on_failure)
    assert answer.returncode != 0
    assert (
        'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported '
        "when podFailurePolicy is specified" in answer.stderr
    )
    answer = await kubectl(
        "apply",
        "-f",
        "-",
        input=job("pfi", "exit 1", podFailurePolicy={"rules": [exit_rule("FailIndex", 1)]}),
    )
    assert 'spec.podFailurePolicy.rules[0].action: Invalid value: "FailIndex": requires the ' in (
        answer.stderr
    )
    for field in ("successPolicy", "backoffLimitPerIndex"):
        value: Any = {"rules": [{"succeededCount": 1}]} if field == "successPolicy" else 1
        manifest = job(
            f"not-{field.lower()}",
            "exit 0",
            completionMode="Indexed",
            completions=2,
            **{field: value},
        )
        answer = await kubectl("apply", "-f", "-", input=manifest)
        assert answer.returncode != 0
        assert (
            f"spec.{field}: Forbidden: not run by the dev cluster's Job controller" in answer.stderr
        )


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
    # Resuming sets Suspended False (kube keeps the condition), and restarts the clock.
    suspended = {
        c["type"]: c for c in (await get_json(kubectl, "job", "held"))["status"]["conditions"]
    }["Suspended"]
    assert (suspended["status"], suspended["reason"], suspended["message"]) == (
        "False",
        "JobResumed",
        "Job resumed",
    )
