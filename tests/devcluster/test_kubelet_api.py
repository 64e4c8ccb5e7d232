"""The kubelet API on Kubernetes' control plane (docs/design.md §8.2): `kubectl logs` goes
through the real kube-apiserver, which proxies it to our kubelet's HTTPS server with its
client certificate and checks the kubelet's serving certificate against the cluster CA; a
caller without a client certificate is refused. The same kubectl commands run against the
embedded control plane, whose API server serves pods/log itself, and read the same."""

from __future__ import annotations

import re
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from devkube import DevCluster
from tests.harness import control_planes
from tests.harness.cluster import running_cluster
from tests.harness.kubectl import Run, ok, refused, runner
from tests.harness.waiting import eventually

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.control_planes]

NO_KUBELET_API = "the embedded API server serves pods/log itself: there is no kubelet API"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(control_plane: str) -> AsyncIterator[DevCluster]:
    control_planes.require(control_plane)
    async with running_cluster(["cpu:1"], control_plane=control_plane) as started:
        yield started


@pytest.fixture
def kubectl(cluster: DevCluster, tmp_path: Path) -> Run:
    return runner(cluster.write_kubeconfig(tmp_path / "kubeconfig"))


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


async def _node(cluster: DevCluster) -> dict[str, Any]:
    node: dict[str, Any] = await cluster.client.get(f"/api/v1/nodes/{cluster.node_names[0]}")
    return node


async def test_kubectl_logs_reach_the_kubelet_through_kube_apiserver(
    cluster: DevCluster, kubectl: Run
) -> None:
    await cluster.apply(_pod("logs"))

    async def logged() -> None:
        text = await ok(kubectl, "logs", "logs")
        assert "started" in text, text

    await eventually(logged, 30)
    text = await ok(kubectl, "logs", "logs", "-c", "main")
    assert "[devcluster] container main (busybox) started on cpu-0-n0" in text
    # kubectl's options reach the kubelet as kube-apiserver rewrites them.
    assert await ok(kubectl, "logs", "logs", "--tail=0") == ""
    assert await ok(kubectl, "logs", "logs", "--limit-bytes=7") == text[:7]
    stamped = await ok(kubectl, "logs", "logs", "--timestamps")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z " + re.escape(text), stamped)
    assert await ok(kubectl, "logs", "logs", "--since=1h") == text

    async def aged_out() -> None:
        assert await ok(kubectl, "logs", "logs", "--since=1s") == ""

    await eventually(aged_out, 30)


async def test_previous_logs_are_the_run_before_the_restart(
    cluster: DevCluster, kubectl: Run
) -> None:
    await cluster.apply(_pod("restarts"))

    async def started() -> None:
        assert "started" in await ok(kubectl, "logs", "restarts")

    await eventually(started, 30)
    never = await refused(kubectl, "logs", "restarts", "--previous")
    assert never == (
        'Error from server (BadRequest): previous terminated container "main" in pod '
        '"restarts" not found'
    )
    await cluster.fail_pod("default", "restarts", exit_code=3)
    before = await ok(kubectl, "logs", "restarts", "--previous")
    assert before.splitlines()[-1].endswith("container main exited with code 3"), before
    assert "exited" in await ok(kubectl, "logs", "restarts", "-p", "--tail=1")


async def test_exec_on_the_simulated_runtime_is_refused_with_the_reason(
    cluster: DevCluster, kubectl: Run
) -> None:
    await cluster.apply(_pod("noexec"))

    async def refusal() -> None:
        done = await kubectl("exec", "noexec", "--", "echo", "hi")
        assert "containers are not processes" in done.stderr, done.stderr

    await eventually(refusal, 30)


async def test_nodes_say_where_their_kubelet_api_is(
    cluster: DevCluster, control_plane: str
) -> None:
    if control_plane == control_planes.EMBEDDED:
        pytest.skip(NO_KUBELET_API)
    status = (await _node(cluster))["status"]
    port = status["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    assert port > 0
    assert "ExtendWebSocketsToKubelet" in status["declaredFeatures"]
    internal = [a["address"] for a in status["addresses"] if a["type"] == "InternalIP"]
    assert internal == ["127.0.0.1"]


async def test_the_kubelet_api_refuses_a_caller_without_a_client_certificate(
    cluster: DevCluster, control_plane: str
) -> None:
    if control_plane == control_planes.EMBEDDED:
        pytest.skip(NO_KUBELET_API)
    port = (await _node(cluster))["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    # Its serving certificate is the cluster CA's: verification passes; the caller is unknown.
    context = ssl.create_default_context(cadata=cluster.ca_pem.decode())
    url = f"https://127.0.0.1:{port}/containerLogs/default/logs/main"
    async with aiohttp.ClientSession() as session, session.get(url, ssl=context) as answer:
        assert answer.status == 401
