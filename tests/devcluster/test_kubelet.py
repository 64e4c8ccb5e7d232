"""The simulated kubelet, through the HTTP API of a running dev cluster."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from devkube import DevCluster

#: One cluster for the module's tests, each with pods of its own names (docs/design.md §8.1);
#: a failed node, injected faults, dropped watches and a stopped kubelet take `private_cluster`.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def dev_cluster(module_cluster: DevCluster) -> DevCluster:
    return module_cluster


PODS = "/api/v1/namespaces/default/pods"


def pod(name: str, *, restart: str = "Always", containers: int = 2, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "restartPolicy": restart,
            "containers": [{"name": f"c{i}", "image": "busybox"} for i in range(containers)],
            **spec,
        },
    }


async def running_and_ready(cluster: DevCluster, name: str) -> dict[str, Any]:
    got = await cluster.client.get(f"{PODS}/{name}")
    status = got.get("status") or {}
    assert status.get("phase") == "Running", status
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Ready"] == "True"
    return got


async def test_created_pods_become_running_and_ready(
    dev_cluster: DevCluster, eventually: Any
) -> None:
    await dev_cluster.client.create(PODS, pod("web"))
    await dev_cluster.client.create(PODS, pod("web2"))

    async def check() -> None:
        for name in ("web", "web2"):
            await running_and_ready(dev_cluster, name)

    await eventually(check)
    web = await running_and_ready(dev_cluster, "web")
    web2 = await running_and_ready(dev_cluster, "web2")
    status = web["status"]
    assert [c["name"] for c in status["containerStatuses"]] == ["c0", "c1"]
    first = status["containerStatuses"][0]
    assert first["ready"] and first["started"] and first["restartCount"] == 0
    assert "startedAt" in first["state"]["running"]
    assert {c["type"] for c in status["conditions"]} >= {
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodScheduled",
    }
    assert status["startTime"] and status["hostIP"]
    assert status["podIP"] != web2["status"]["podIP"]
    node = await dev_cluster.client.get(f"/api/v1/nodes/{web['spec']['nodeName']}")
    assert status["hostIP"] == node["status"]["addresses"][0]["address"]


async def test_graceful_delete_finishes(dev_cluster: DevCluster, eventually: Any) -> None:
    await dev_cluster.client.create(PODS, pod("doomed"))
    await eventually(lambda: running_and_ready(dev_cluster, "doomed"))
    await dev_cluster.client.delete(f"{PODS}/doomed")
    terminating = await dev_cluster.client.get(f"{PODS}/doomed")
    assert terminating["metadata"]["deletionTimestamp"]

    async def gone() -> None:
        names = [p["metadata"]["name"] for p in (await dev_cluster.client.list(PODS))["items"]]
        assert "doomed" not in names

    await eventually(gone)


async def test_fail_pod_with_restart_never_fails_it(
    dev_cluster: DevCluster, eventually: Any
) -> None:
    await dev_cluster.client.create(PODS, pod("once", restart="Never"))
    await eventually(lambda: running_and_ready(dev_cluster, "once"))
    await dev_cluster.fail_pod("default", "once", exit_code=3)
    status = (await dev_cluster.client.get(f"{PODS}/once"))["status"]
    assert status["phase"] == "Failed"
    terminated = status["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 3
    assert not status["containerStatuses"][0]["ready"]


async def test_fail_one_container_with_restart_never_keeps_the_pod_running(
    dev_cluster: DevCluster, eventually: Any
) -> None:
    # The KubeRay case: the ray container died, a sidecar lives on.
    await dev_cluster.client.create(PODS, pod("half", restart="Never"))
    await eventually(lambda: running_and_ready(dev_cluster, "half"))
    await dev_cluster.fail_pod("default", "half", container="c0")
    status = (await dev_cluster.client.get(f"{PODS}/half"))["status"]
    assert status["phase"] == "Running"
    assert "terminated" in status["containerStatuses"][0]["state"]
    assert status["containerStatuses"][1]["ready"]
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "False"


@pytest.mark.parametrize("policy", ["Always", "OnFailure"])
async def test_fail_pod_with_restarts_restarts_the_container(
    dev_cluster: DevCluster, eventually: Any, policy: str
) -> None:
    name = f"phoenix-{policy.lower()}"  # the module's cluster holds both policies' pods
    await dev_cluster.client.create(PODS, pod(name, restart=policy))
    await eventually(lambda: running_and_ready(dev_cluster, name))
    await dev_cluster.fail_pod("default", name)

    async def restarted() -> None:
        got = await running_and_ready(dev_cluster, name)
        first = got["status"]["containerStatuses"][0]
        assert first["restartCount"] == 1
        assert first["lastState"]["terminated"]["exitCode"] == 1

    await eventually(restarted)


async def test_fail_node_fails_its_pods(private_cluster: DevCluster, eventually: Any) -> None:
    target = "cpu-0-n2"
    await private_cluster.client.create(
        PODS, pod("victim", nodeSelector={"kubernetes.io/hostname": target})
    )
    await private_cluster.client.create(
        PODS, pod("bystander", nodeSelector={"kubernetes.io/hostname": "cpu-0-n3"})
    )
    await eventually(lambda: running_and_ready(private_cluster, "victim"))
    await eventually(lambda: running_and_ready(private_cluster, "bystander"))
    await private_cluster.fail_node(target)
    node = await private_cluster.client.get(f"/api/v1/nodes/{target}")
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    unready = (await private_cluster.client.get(f"{PODS}/victim"))["status"]
    assert {c["type"]: c["status"] for c in unready["conditions"]}["Ready"] == "False"

    async def failed() -> None:
        status = (await private_cluster.client.get(f"{PODS}/victim"))["status"]
        assert status["phase"] == "Failed"
        assert status["reason"] == "NodeLost"

    await eventually(failed)
    await running_and_ready(private_cluster, "bystander")
    # Nothing new lands on the lost node.
    await private_cluster.client.create(
        PODS, pod("late", nodeSelector={"kubernetes.io/hostname": target})
    )

    async def unschedulable() -> None:
        status = (await private_cluster.client.get(f"{PODS}/late"))["status"]
        scheduled = [c for c in status.get("conditions") or [] if c["type"] == "PodScheduled"]
        assert scheduled and scheduled[0]["status"] == "False"
        assert scheduled[0]["reason"] == "Unschedulable"

    await eventually(unschedulable)
    await private_cluster.restore_node(target)
    await eventually(lambda: running_and_ready(private_cluster, "late"))


async def test_status_writes_survive_injected_faults(
    private_cluster: DevCluster, eventually: Any
) -> None:
    private_cluster.faults.fail("patch", "pods/status", rate=0.6, code=503)
    private_cluster.faults.fail("create", "pods/binding", rate=0.6, code=500)
    for i in range(4):
        await private_cluster.client.create(PODS, pod(f"tough-{i}"))

    async def check() -> None:
        for i in range(4):
            await running_and_ready(private_cluster, f"tough-{i}")

    await eventually(check)


async def test_controllers_resume_after_dropped_watches(
    private_cluster: DevCluster, eventually: Any
) -> None:
    await private_cluster.client.create(PODS, pod("before"))
    await eventually(lambda: running_and_ready(private_cluster, "before"))
    assert private_cluster.faults.drop_watches() > 0
    await private_cluster.client.create(PODS, pod("after"))
    await eventually(lambda: running_and_ready(private_cluster, "after"))
    private_cluster.faults.drop_watches()
    await private_cluster.client.delete(f"{PODS}/after")

    async def gone() -> None:
        names = [p["metadata"]["name"] for p in (await private_cluster.client.list(PODS))["items"]]
        assert names == ["before"]

    await eventually(gone)


async def test_kubectl_logs_show_the_simulated_lifecycle(
    dev_cluster: DevCluster, eventually: Any, kubectl: Any
) -> None:
    await dev_cluster.client.create(PODS, pod("chatty"))
    await eventually(lambda: running_and_ready(dev_cluster, "chatty"))
    await dev_cluster.fail_pod("default", "chatty", exit_code=7, container="c1")

    async def restarted() -> None:
        got = await running_and_ready(dev_cluster, "chatty")
        assert got["status"]["containerStatuses"][1]["restartCount"] == 1

    await eventually(restarted)
    first = await kubectl("logs", "chatty")
    assert first.returncode == 0, first.stderr
    assert "container c0 (busybox) started on" in first.stdout
    second = await kubectl("logs", "chatty", "-c", "c1")
    lines = second.stdout.splitlines()
    assert [line.split("] ", 1)[1].split(" on ")[0] for line in lines] == [
        "container c1 (busybox) started",
        "container c1 exited with code 7",
        "container c1 (busybox) started",
    ]
    tail = await kubectl("logs", "chatty", "-c", "c1", "--tail=1")
    assert "restart 1" in tail.stdout and len(tail.stdout.splitlines()) == 1


async def test_the_ready_annotation_fails_readiness_until_it_goes(
    dev_cluster: DevCluster, eventually: Any
) -> None:
    """`kubectl annotate pod P dev.raycluster-operator.io/ready=false`: Running, not Ready."""
    await dev_cluster.client.create(PODS, pod("probed", containers=1))
    await eventually(lambda: running_and_ready(dev_cluster, "probed"))
    annotate = {"metadata": {"annotations": {"dev.raycluster-operator.io/ready": "false"}}}
    await dev_cluster.client.patch(f"{PODS}/probed", annotate)

    async def unready() -> None:
        status = (await dev_cluster.client.get(f"{PODS}/probed"))["status"]
        conditions = {c["type"]: c for c in status["conditions"]}
        assert status["phase"] == "Running"
        assert conditions["Ready"]["status"] == "False"
        assert conditions["Ready"]["reason"] == "ContainersNotReady"
        assert not status["containerStatuses"][0]["ready"]
        assert "running" in status["containerStatuses"][0]["state"]

    await eventually(unready)
    clear = {"metadata": {"annotations": {"dev.raycluster-operator.io/ready": None}}}
    await dev_cluster.client.patch(f"{PODS}/probed", clear)
    await eventually(lambda: running_and_ready(dev_cluster, "probed"))


async def test_grace_0_removes_a_pod_of_a_stopped_kubelet_at_once(
    private_cluster: DevCluster, eventually: Any
) -> None:
    """As kube-apiserver: a delete with gracePeriodSeconds=0 removes the object whatever the
    node's state; a graceful one waits for a kubelet that does not come."""
    await private_cluster.client.create(PODS, pod("forced", containers=1))
    await eventually(lambda: running_and_ready(private_cluster, "forced"))
    node = (await private_cluster.client.get(f"{PODS}/forced"))["spec"]["nodeName"]
    await private_cluster.client.create(PODS, pod("graceful", containers=1, nodeName=node))
    await eventually(lambda: running_and_ready(private_cluster, "graceful"))
    stopped = {"metadata": {"annotations": {"dev.raycluster-operator.io/kubelet": "stopped"}}}
    await private_cluster.client.patch(f"/api/v1/nodes/{node}", stopped)
    await private_cluster.client.delete(f"{PODS}/graceful")
    await private_cluster.client.delete(f"{PODS}/forced", grace_period_seconds=0)
    pods = {p["metadata"]["name"]: p for p in (await private_cluster.client.list(PODS))["items"]}
    assert "forced" not in pods
    assert pods["graceful"]["metadata"]["deletionTimestamp"]


async def test_a_container_whose_command_exits_at_once_fails_its_pod(
    dev_cluster: DevCluster, eventually: Any
) -> None:
    # A bad command, as the operator wraps it: the user's line runs before `ray start`.
    spec = pod("bad", restart="Never", containers=1)
    spec["spec"]["containers"][0] |= {
        "command": ["/bin/bash", "-c", "--"],
        "args": ["exit 3 && ulimit -n 65536; ray start --block"],
    }
    await dev_cluster.client.create(PODS, spec)

    async def failed() -> None:
        status = (await dev_cluster.client.get(f"{PODS}/bad"))["status"]
        assert status["phase"] == "Failed"
        assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3

    await eventually(failed)


async def test_a_container_that_exits_at_once_under_always_restarts_at_most_once_a_second(
    dev_cluster: DevCluster, eventually: Any
) -> None:
    spec = pod("loop", restart="Always", containers=1)
    spec["spec"]["containers"][0]["command"] = ["false"]
    loop = asyncio.get_running_loop()
    began = loop.time()
    await dev_cluster.client.create(PODS, spec)

    async def exited_three_times() -> dict[str, Any]:
        got = await dev_cluster.client.get(f"{PODS}/loop")
        statuses = got["status"].get("containerStatuses")
        assert statuses
        first = statuses[0]
        assert first["restartCount"] >= 3
        assert first["lastState"]["terminated"]["exitCode"] == 1
        return got

    got = await eventually(exited_three_times)
    # Three exits are two restarts, each at least a second after the exit before it.
    assert loop.time() - began >= 1.9
    first = got["status"]["containerStatuses"][0]
    assert got["status"]["phase"] == "Running" and not first["ready"]
