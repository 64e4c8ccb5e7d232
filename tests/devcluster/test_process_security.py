"""The process runtime honours who a container runs as, as the kubelet does: `runAsUser`,
`runAsGroup` (container over pod) and `supplementalGroups` become the process's uid, gid and
groups, `kubectl exec` runs as that user too, a non-root container cannot write what root
owns, and `runAsNonRoot: true` without a non-zero user is refused with the kubelet's
`CreateContainerConfigError` and message."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devkube import DevCluster
from tests.harness.kubectl import ok
from tests.harness.waiting import eventually

pytestmark = pytest.mark.process_runtime


@pytest.fixture
async def dev_cluster() -> AsyncIterator[DevCluster]:
    """Overrides the shared fixture, so `kubectl` talks to this cluster."""
    async with DevCluster(runtime="process") as cluster:
        yield cluster


def sleeper(name: str, ns: str, sc: dict[str, Any], pod_sc: dict[str, Any] | None = None) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "securityContext": pod_sc or {},
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "command": ["sleep", "infinity"],
                        "securityContext": sc,
                    }
                ],
            },
        }
    )


async def running(kubectl: Any, ns: str, name: str) -> None:
    pod = json.loads(await ok(kubectl, "get", "pod", name, "-n", ns, "-o", "json"))
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    assert statuses and "running" in statuses[0]["state"], statuses


async def test_run_as_user_group_and_supplemental_groups(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    ns = "who"
    await ok(kubectl, "create", "namespace", ns)
    body = sleeper(
        "u",
        ns,
        {"runAsUser": 1000},
        {"runAsUser": 2000, "runAsGroup": 3000, "supplementalGroups": [4000]},
    )
    await ok(kubectl, "apply", "-f", "-", input=body)
    await eventually(lambda: running(kubectl, ns, "u"), within=60)
    assert (await ok(kubectl, "exec", "u", "-n", ns, "--", "id", "-u")).strip() == "1000"
    assert (await ok(kubectl, "exec", "u", "-n", ns, "--", "id", "-g")).strip() == "3000"
    assert "4000" in (await ok(kubectl, "exec", "u", "-n", ns, "--", "id", "-G")).split()
    # The container's main process runs as that user, not only exec.
    ps = await ok(kubectl, "exec", "u", "-n", ns, "--", "sh", "-c", "stat -c %u /proc/1/.")
    assert ps.strip() in ("0", "1000")  # PID 1 is the pod's init (root)
    main = await ok(
        kubectl, "exec", "u", "-n", ns, "--", "sh", "-c", "ps -o uid= -C sleep | head -1"
    )
    assert main.strip() == "1000", main
    # Root's files stay root's: the shared file system is not writable to the container.
    denied = await kubectl("exec", "u", "-n", ns, "--", "sh", "-c", "touch /etc/devk-not-mine")
    assert denied.returncode != 0
    # Its private /tmp is.
    await ok(kubectl, "exec", "u", "-n", ns, "--", "sh", "-c", "touch /tmp/mine")


async def test_run_as_non_root_without_a_user_is_refused_as_the_kubelet_does(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    ns = "nonroot"
    await ok(kubectl, "create", "namespace", ns)
    await ok(kubectl, "apply", "-f", "-", input=sleeper("r", ns, {"runAsNonRoot": True}))

    async def refused() -> dict[str, Any]:
        pod = json.loads(await ok(kubectl, "get", "pod", "r", "-n", ns, "-o", "json"))
        waiting = pod["status"]["containerStatuses"][0]["state"].get("waiting") or {}
        assert waiting.get("reason") == "CreateContainerConfigError", pod["status"]
        return pod

    pod = await eventually(refused, within=60)
    uid = pod["metadata"]["uid"]
    waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["message"] == (
        f'container has runAsNonRoot and image will run as root (pod: "r_{ns}({uid})", '
        "container: main)"
    )
    table = await ok(kubectl, "get", "pod", "r", "-n", ns)
    assert "CreateContainerConfigError" in table
    # With a non-root user it runs.
    await ok(
        kubectl,
        "apply",
        "-f",
        "-",
        input=sleeper("ok", ns, {"runAsNonRoot": True, "runAsUser": 1000}),
    )
    await eventually(lambda: running(kubectl, ns, "ok"), within=60)
