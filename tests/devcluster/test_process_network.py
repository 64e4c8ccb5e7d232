"""A network namespace per pod on the process runtime (run under `flock /tmp/realray.lock`):
each pod its own ports and loopback, reachable on the cluster's bridge only, and nothing left
behind after a stop or a crash."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest
from test_process_cluster import python_pod, status_of

from devkube import DevCluster
from devkube.process import process_runtime_available
from devkube.process.network import PREFIX, netns_available
from tests.harness.cluster import running_cluster

AVAILABLE, WHY = process_runtime_available()
NETNS, NETNS_WHY = netns_available() if AVAILABLE else (False, WHY)
needs_netns = pytest.mark.skipif(not NETNS, reason=NETNS_WHY)

PODS = "/api/v1/namespaces/default/pods"

# Binds what every Ray node's agent binds: a wildcard port and one on 127.0.0.1.
TWIN = """
import http.server, os, threading
class Name(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(os.environ["POD_NAME"].encode())
local = http.server.HTTPServer(("127.0.0.1", 52365), Name)
threading.Thread(target=local.serve_forever, daemon=True).start()
http.server.HTTPServer(("0.0.0.0", 8080), Name).serve_forever()
"""


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=True).stdout


def _dead_pid() -> int:
    pid = 0x3FFFF0
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    return pid


def _ip_quiet(*args: str) -> None:
    subprocess.run(["ip", *args], capture_output=True, check=False)


@pytest.fixture
async def dev_cluster() -> AsyncIterator[DevCluster]:
    async with running_cluster(runtime="process") as cluster:
        yield cluster


@needs_netns
async def test_pods_have_their_own_ports_loopback_and_no_way_out(
    dev_cluster: DevCluster, kubectl: Any, eventually: Any
) -> None:
    assert dev_cluster.shared_network_reason == ""
    probe = {"readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}}
    for name in ("twin-a", "twin-b"):
        await dev_cluster.client.create(PODS, python_pod(name, TWIN, container=probe))

    async def both_ready() -> dict[str, str]:
        ips = {}
        for name in ("twin-a", "twin-b"):
            status = await status_of(dev_cluster, name)
            ready = {c["type"]: c["status"] for c in status.get("conditions") or []}
            assert ready.get("Ready") == "True", status
            ips[name] = status["podIP"]
        return ips

    ips = await eventually(both_ready, within=60)
    pod_range = ipaddress.ip_network("198.18.0.0/15")  # network.py's SUBNETS
    assert all(ipaddress.ip_address(ip) in pod_range for ip in ips.values()), ips
    # Each pod's own 127.0.0.1:52365 and the other pod's 8080 by its IP.
    fetch = "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())"
    mine = await kubectl("exec", "twin-a", "--", "python3", "-c", fetch, "http://127.0.0.1:52365/")
    assert mine.stdout.strip() == "twin-a", mine.stderr
    other = await kubectl(
        "exec", "twin-a", "--", "python3", "-c", fetch, f"http://{ips['twin-b']}:8080/"
    )
    assert other.stdout.strip() == "twin-b", other.stderr
    # Only the bridge's subnet is routed in a pod: no default route, lo and eth0 only.
    routes = await kubectl("exec", "twin-a", "--", "cat", "/proc/net/route")
    destinations = [line.split()[1] for line in routes.stdout.splitlines()[1:]]
    assert destinations and "00000000" not in destinations, routes.stdout
    links = await kubectl("exec", "twin-a", "--", "cat", "/proc/net/dev")
    names = [line.split(":")[0].strip() for line in links.stdout.splitlines()[2:]]
    assert sorted(names) == ["eth0", "lo"], links.stdout
    # A server on the host's loopback is not the pod's loopback.
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        reach = await kubectl("exec", "twin-a", "--", "python3", "-c", connect)
        assert reach.returncode != 0 and "Connection refused" in reach.stderr, reach.stderr
    finally:
        server.close()


@needs_netns
async def test_everything_is_removed_at_stop_and_stale_leftovers_at_start() -> None:
    dead = _dead_pid()
    stale_link = f"{PREFIX}{dead:06x}0b"
    stale_ns = f"{PREFIX}{dead:06x}0-1"
    _ip("link", "add", stale_link, "type", "bridge")
    _ip("netns", "add", stale_ns)
    try:
        async with running_cluster(runtime="process") as cluster:
            assert stale_link not in _ip("-o", "link")
            assert stale_ns not in _ip("netns", "list")
            network = cluster._network
            assert network is not None and network.bridge in _ip("-o", "link")
            await cluster.client.create(PODS, python_pod("p", "import time; time.sleep(600)"))

            async def running() -> None:
                assert (await status_of(cluster, "p")).get("phase") == "Running"

            from tests.harness.waiting import eventually

            await eventually(running, within=60)
            assert f"{PREFIX}{network.tag}-" in _ip("netns", "list")
        ours = f"{PREFIX}{network.tag}"
        assert ours not in _ip("-o", "link")
        assert ours not in _ip("netns", "list")
    finally:
        _ip_quiet("link", "delete", stale_link)
        _ip_quiet("netns", "delete", stale_ns)


@pytest.mark.process_runtime
async def test_on_the_shared_network_a_port_clash_is_refused_not_crash_looped(
    tmp_path: Any, eventually: Any
) -> None:
    """A process runtime made without a pod network (the fallback) shares the host's ports:
    a second pod declaring a port the first declares is refused once, with a Warning Event
    and a False PodReadyToStartContainers condition, instead of starting and crash-looping."""
    from devkube.process.runtime import ProcessRuntime

    ports = {"ports": [{"name": "metrics", "containerPort": 8080}]}
    sleeper = "import time; time.sleep(600)"
    async with running_cluster(runtime=ProcessRuntime(state_dir=tmp_path)) as cluster:
        await cluster.client.create(PODS, python_pod("first", sleeper, container=ports))

        async def first_running() -> None:
            assert (await status_of(cluster, "first")).get("phase") == "Running"

        await eventually(first_running, within=60)
        await cluster.client.create(PODS, python_pod("second", sleeper, container=ports))

        async def refused() -> dict[str, Any]:
            status = await status_of(cluster, "second")
            conditions = {c["type"]: c for c in status.get("conditions") or []}
            sandbox = conditions.get("PodReadyToStartContainers") or {}
            assert sandbox.get("status") == "False", status
            return dict(sandbox)

        sandbox = await eventually(refused, within=30)
        assert sandbox["reason"] == "NetworkNotIsolated"
        assert "port 8080/TCP is already used by pod default/first" in sandbox["message"]

        async def warned() -> None:
            events = await cluster.client.list(
                "/api/v1/namespaces/default/events", fieldSelector="involvedObject.name=second"
            )
            warnings = [e["reason"] for e in events["items"] if e["type"] == "Warning"]
            assert warnings == ["NetworkNotIsolated"], events["items"]

        await eventually(warned, within=30)
        status = await status_of(cluster, "second")
        assert status["phase"] == "Pending"
        assert all(s["restartCount"] == 0 for s in status.get("containerStatuses") or [])
