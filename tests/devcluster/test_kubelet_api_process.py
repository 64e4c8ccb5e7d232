"""`kubectl logs`, `exec` and `port-forward` through the real kube-apiserver to the process
runtime's pods (docs/design.md §8.2): kube-apiserver proxies each to the kubelet API, which runs
the command in the pod or connects to its port."""

from __future__ import annotations

import asyncio
import re
import subprocess
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from test_process_cluster import SERVER, python_pod

from devkube import DevCluster
from tests.harness import control_planes
from tests.harness.cluster import running_cluster
from tests.harness.kubectl import Run, kubectl_binary, ok, runner
from tests.harness.waiting import eventually

pytestmark = [
    pytest.mark.process_runtime,
    pytest.mark.kubernetes,
    pytest.mark.asyncio(loop_scope="module"),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def web() -> AsyncIterator[DevCluster]:
    """A process-runtime cluster on Kubernetes' control plane with a pod `web` serving HTTP
    on its IP:8080."""
    control_planes.require(control_planes.KUBERNETES)
    async with running_cluster(["cpu:1"], runtime="process", control_plane="kubernetes") as cluster:
        await cluster.apply(
            python_pod("web", SERVER, container={"ports": [{"containerPort": 8080}]})
        )

        async def running() -> None:
            pod = await cluster.client.get("/api/v1/namespaces/default/pods/web")
            assert pod["status"].get("phase") == "Running", pod["status"]

        await eventually(running, 60)
        yield cluster


@pytest.fixture
def kubeconfig(web: DevCluster, tmp_path: Path) -> Path:
    return web.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def kubectl(kubeconfig: Path) -> Run:
    return runner(kubeconfig)


async def test_logs_show_what_the_container_printed(kubectl: Run) -> None:
    async def printed() -> None:
        assert (await ok(kubectl, "logs", "web")).startswith("serving on ")

    await eventually(printed, 30)


async def test_exec_runs_in_the_pod_and_returns_its_exit_code(kubectl: Run) -> None:
    assert await ok(kubectl, "exec", "web", "--", "echo", "hi") == "hi\n"
    failed = await kubectl("exec", "web", "--", "sh", "-c", "echo oops >&2; exit 3")
    assert failed.returncode == 3, failed.stderr
    assert "oops" in failed.stderr
    piped = await kubectl("exec", "-i", "web", "--", "wc", "-l", input="a\nb\n")
    assert piped.stdout.strip() == "2", piped.stderr


def _get(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
        return str(response.read().decode())


async def test_port_forward_reaches_the_pods_port(kubeconfig: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        kubectl_binary(),
        f"--kubeconfig={kubeconfig}",
        "port-forward",
        "pod/web",
        ":8080",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await proc.stdout.readline()).decode()
        match = re.search(r"Forwarding from 127\.0\.0\.1:(\d+)", line)
        assert match, line
        for _ in range(2):  # two connections through one session
            assert await asyncio.to_thread(_get, int(match.group(1))) == "hello from web"
    finally:
        proc.terminate()
        await proc.wait()
