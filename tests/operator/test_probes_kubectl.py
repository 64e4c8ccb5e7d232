"""KubeRay's probes on the pods the operator creates, read with the real kubectl
(docs/design.md, rule 3.4c): every Ray container gets them, a user's own is kept, and the
operator's ENABLE_PROBES_INJECTION=false leaves them out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from parity_kubectl import Kubectl

from tests.harness.operator_world import SharedWorld, World, cpu_group, eventually, raycluster

#: The shared world's tests run on its module loop; the private one on its own.
SHARED = pytest.mark.asyncio(loop_scope="module")


def _ray_containers(pods: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p["spec"]["containers"][0] for p in pods["items"]}


async def _pods(kubectl: Kubectl, cluster: str, count: int) -> dict[str, dict[str, Any]]:
    async def listed() -> dict[str, dict[str, Any]]:
        pods = _ray_containers(await kubectl.json("get", "pods", "-l", f"ray.io/cluster={cluster}"))
        assert len(pods) == count, sorted(pods)
        return pods

    found: dict[str, dict[str, Any]] = await eventually(listed, within=30)
    return found


@SHARED
async def test_every_ray_container_is_probed_and_a_users_probe_kept(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    kubectl = Kubectl(shared_world.cluster, tmp_path)
    obj = raycluster("probed", [cpu_group("g", replicas=1, hosts=2)])
    obj["spec"]["rayVersion"] = "2.60.0"
    mine = {"tcpSocket": {"port": 6379}, "periodSeconds": 3}
    obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["readinessProbe"] = mine
    await kubectl.apply(obj)
    pods = await _pods(kubectl, "probed", 3)
    for name, container in pods.items():
        liveness = container["livenessProbe"]
        assert liveness["httpGet"]["path"] == "/api/healthz", name
        assert liveness["httpGet"]["port"] == 52365, name
        if "-head-" in name:
            assert container["readinessProbe"]["tcpSocket"] == {"port": 6379}
            assert container["readinessProbe"]["periodSeconds"] == 3
        else:
            assert container["readinessProbe"]["httpGet"]["path"] == "/api/healthz"
            assert container["readinessProbe"]["initialDelaySeconds"] == 10


@SHARED
async def test_an_old_ray_is_probed_with_kuberays_wget_checks(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    kubectl = Kubectl(shared_world.cluster, tmp_path)
    obj = raycluster("oldray", [cpu_group("g", replicas=1)])
    obj["spec"]["rayVersion"] = "2.46.0"
    await kubectl.apply(obj)
    pods = await _pods(kubectl, "oldray", 2)
    for name, container in pods.items():
        command = container["readinessProbe"]["exec"]["command"]
        assert "api/local_raylet_healthz" in command[2], name
        assert ("api/gcs_healthz" in command[2]) == ("-head-" in name), name


async def test_enable_probes_injection_false_injects_none(world: World, tmp_path: Path) -> None:
    kubectl = Kubectl(world.cluster, tmp_path)
    await world.start_operator(inject_probes=False)
    obj = raycluster("plain", [cpu_group("g", replicas=1)])
    obj["spec"]["rayVersion"] = "2.60.0"
    await kubectl.apply(obj)
    pods = await _pods(kubectl, "plain", 2)
    for container in pods.values():
        assert "readinessProbe" not in container
        assert "livenessProbe" not in container
