"""The dev cluster with `runtime="process"`: pods are real processes reachable by DNS names."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devkube import DevCluster
from tests.harness.cluster import running_cluster

pytestmark = pytest.mark.process_runtime

PODS = "/api/v1/namespaces/default/pods"
SERVICES = "/api/v1/namespaces/default/services"

SERVER = """
import http.server, os
class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello from " + os.environ["POD_NAME"]).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)
print("serving on", os.environ["POD_IP"], flush=True)
http.server.HTTPServer((os.environ["POD_IP"], 8080), Hello).serve_forever()
"""

CLIENT = """
import os, time, urllib.request
token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read()
print("token ok" if token else "no token", flush=True)
print("api", os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])
while True:
    try:
        print(urllib.request.urlopen("http://web.default.svc:8080/", timeout=2).read().decode(),
              flush=True)
        break
    except OSError as error:
        print("retry", error, flush=True)
        time.sleep(0.2)
"""

DOWNWARD = [
    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
]


def python_pod(name: str, code: str, **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": "python",
        "command": [sys.executable, "-u", "-c", code],
        "env": DOWNWARD,
        **extra.pop("container", {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", **extra.pop("metadata", {})},
        "spec": {"containers": [container], **extra},
    }


@pytest.fixture
async def dev_cluster() -> AsyncIterator[DevCluster]:
    """Overrides the shared fixture, so `kubectl` talks to this cluster."""
    async with running_cluster(runtime="process") as cluster:
        yield cluster


@pytest.fixture
def process_cluster(dev_cluster: DevCluster) -> DevCluster:
    return dev_cluster


async def status_of(cluster: DevCluster, name: str) -> dict[str, Any]:
    pod = await cluster.client.get(f"{PODS}/{name}")
    status: dict[str, Any] = pod.get("status") or {}
    return status


async def test_pods_serve_on_their_ip_and_reach_each_other_by_service_name(
    process_cluster: DevCluster, eventually: Any, kubectl: Any
) -> None:
    cluster = process_cluster
    web = python_pod(
        "web",
        SERVER,
        metadata={"labels": {"app": "web"}},
        container={
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
        },
    )
    await cluster.client.create(PODS, web)
    await cluster.client.create(
        SERVICES,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 8080}]},
        },
    )

    async def web_ready() -> None:
        status = await status_of(cluster, "web")
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        assert status.get("phase") == "Running" and conditions.get("Ready") == "True", status

    await eventually(web_ready)
    web_ip = (await status_of(cluster, "web"))["podIP"]
    # A network namespace per pod on the cluster's bridge (198.18.0.0/15), or where the
    # machine refuses that, a loopback address on the shared host network.
    expected = "127.1." if cluster.shared_network_reason else "198.1"
    assert web_ip.startswith(expected), (web_ip, cluster.shared_network_reason)

    await cluster.client.create(PODS, python_pod("client", CLIENT, restartPolicy="Never"))

    async def client_succeeded() -> None:
        assert (await status_of(cluster, "client")).get("phase") == "Succeeded"

    await eventually(client_succeeded)
    logs = await kubectl("logs", "client")
    assert logs.returncode == 0, logs.stderr
    assert "token ok" in logs.stdout
    assert "hello from web" in logs.stdout
    served = await kubectl("logs", "web", "-c", "main")
    assert f"serving on {web_ip}" in served.stdout


IN_CLUSTER = """
from kubernetes import client, config
config.load_incluster_config()
pods = client.CoreV1Api().list_namespaced_pod("default").items
print("sees", sorted(p.metadata.name for p in pods))
"""


async def test_in_cluster_clients_find_and_trust_the_api_server(
    process_cluster: DevCluster, eventually: Any, kubectl: Any
) -> None:
    # The pod's mounted token is its ServiceAccount's (`default`): let it read pods.
    grant = await kubectl("create", "role", "pod-reader", "--verb=list", "--resource=pods")
    assert grant.returncode == 0, grant.stderr
    bind = await kubectl(
        "create",
        "rolebinding",
        "pod-reader",
        "--role=pod-reader",
        "--serviceaccount=default:default",
    )
    assert bind.returncode == 0, bind.stderr
    await process_cluster.client.create(
        PODS, python_pod("incluster", IN_CLUSTER, restartPolicy="Never")
    )

    async def succeeded() -> None:
        assert (await status_of(process_cluster, "incluster")).get("phase") == "Succeeded"

    await eventually(succeeded, within=60)
    logs = await kubectl("logs", "incluster")
    assert "sees ['incluster']" in logs.stdout, logs.stdout


async def test_exit_codes_and_restarts_reach_the_pod_status(
    process_cluster: DevCluster, eventually: Any
) -> None:
    cluster = process_cluster
    failing = python_pod("fails", "raise SystemExit(3)", restartPolicy="Never")
    flaky = python_pod("flaky", "raise SystemExit(1)", restartPolicy="OnFailure")
    await cluster.client.create(PODS, failing)
    await cluster.client.create(PODS, flaky)

    async def failed() -> None:
        status = await status_of(cluster, "fails")
        assert status.get("phase") == "Failed"
        terminated = status["containerStatuses"][0]["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")

    async def restarted() -> None:
        status = await status_of(cluster, "flaky")
        assert status["containerStatuses"][0]["restartCount"] >= 2
        assert status["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1

    await eventually(failed)
    await eventually(restarted)


async def test_deleting_a_pod_ends_its_processes(
    process_cluster: DevCluster, eventually: Any
) -> None:
    cluster = process_cluster
    await cluster.client.create(
        PODS, python_pod("sleeper", "import os; os.system('sleep 300 & sleep 300')")
    )

    async def running() -> None:
        assert (await status_of(cluster, "sleeper")).get("phase") == "Running"

    await eventually(running)
    runtime = cluster.kubelet.runtime
    process_pod = runtime.find("default", "sleeper")  # type: ignore[attr-defined]
    assert process_pod is not None
    pids = process_pod.sandbox.pids()
    assert pids
    await cluster.client.delete(f"{PODS}/sleeper")

    async def gone() -> None:
        names = [p["metadata"]["name"] for p in (await cluster.client.list(PODS))["items"]]
        assert "sleeper" not in names
        assert process_pod.sandbox.pids() == []

    await eventually(gone)


def shell_pod(name: str, script: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "command": ["sh", "-c", script]}
    labels = spec.pop("labels", {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [container], **spec},
    }


async def test_slice_hosts_resolve_each_other_through_the_headless_service(
    process_cluster: DevCluster, eventually: Any, kubectl: Any
) -> None:
    cluster = process_cluster
    await cluster.client.create(
        SERVICES,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "slice", "namespace": "default"},
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": {"slice": "s0"},
            },
        },
    )
    wait_for_peer = "until getent hosts h-1.slice; do sleep 0.1; done; hostname; sleep 300"
    for host in ("h-0", "h-1"):
        await cluster.client.create(
            PODS,
            shell_pod(
                f"pod-{host}",
                wait_for_peer,
                labels={"slice": "s0"},
                hostname=host,
                subdomain="slice",
            ),
        )

    async def resolved() -> None:
        peer_ip = (await status_of(cluster, "pod-h-1")).get("podIP")
        out = (await kubectl("logs", "pod-h-0")).stdout.split()
        assert peer_ip and out[:2] == [peer_ip, "h-1.slice"], out
        assert out[-1] == "h-0"

    await eventually(resolved)
    tail = await kubectl("logs", "pod-h-0", "--tail=1")
    assert tail.stdout == "h-0\n"
