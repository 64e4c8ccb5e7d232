"""On the simulated runtime, kubectl exec, attach, cp and port-forward are refused with a
message that says why, and the SPDY protocol framing port-forward uses round-trips."""

from __future__ import annotations

from typing import Any

from devkube import DevCluster
from devkube.server.endpoints import spdy

PODS = "/api/v1/namespaces/default/pods"
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "sim", "namespace": "default"},
    "spec": {"containers": [{"name": "main", "image": "busybox"}]},
}


async def test_streaming_is_refused_with_the_reason(
    dev_cluster: DevCluster, kubectl: Any, eventually: Any
) -> None:
    await dev_cluster.client.create(PODS, POD)

    async def running() -> None:
        pod = await dev_cluster.client.get(f"{PODS}/sim")
        assert pod["status"].get("phase") == "Running"

    await eventually(running)
    for args in (
        ("exec", "sim", "--", "true"),
        ("attach", "sim"),
        ("port-forward", "pod/sim", "18080:80"),
        ("cp", "sim:/etc/hostname", "/tmp/never-written"),
    ):
        done = await kubectl(*args)
        assert done.returncode != 0, args
        assert "simulated runtime" in done.stderr, (args, done.stderr)
        assert "--runtime process" in done.stderr
    missing = await kubectl("exec", "nope", "--", "true")
    assert missing.returncode != 0
    assert 'pods "nope" not found' in missing.stderr


async def test_discovery_lists_the_streaming_subresources(kubectl: Any) -> None:
    done = await kubectl("get", "--raw", "/api/v1")
    for sub in ("pods/exec", "pods/attach", "pods/portforward"):
        assert f'"name":"{sub}"' in done.stdout.replace(" ", "")


def test_spdy_headers_and_frames_round_trip() -> None:
    # What a client writes (its own zlib context), a server Codec reads, and back.
    client, server = spdy.Codec(), spdy.Codec()
    reply = server.syn_reply(3, {"streamtype": "data", "port": "8080"})
    assert client.feed(reply[:5]) == []  # a partial frame waits for the rest
    (frame,) = client.feed(reply[5:])
    assert frame.kind == spdy.SYN_REPLY and frame.stream_id == 3
    assert frame.headers == {"streamtype": "data", "port": "8080"}
    frames = client.feed(spdy.data(3, b"hello", fin=True) + spdy.ping(b"\0\0\0\x01"))
    assert [(f.kind, f.stream_id, f.data, f.fin) for f in frames] == [
        (0, 3, b"hello", True),
        (spdy.PING, 0, b"\0\0\0\x01", False),
    ]


async def test_streaming_requests_are_create_on_their_subresource(
    dev_cluster: DevCluster, kubectl: Any, eventually: Any
) -> None:
    """kubectl opens exec and port-forward with a GET WebSocket upgrade; authorization sees
    `create` on pods/exec and pods/portforward, as Kubernetes RBAC does (a 403 fault keyed on
    verb and resource stands in for a policy, and names what it matched)."""
    await dev_cluster.client.create(PODS, POD)

    async def running() -> None:
        # kubectl port-forward refuses a pod that is not Running before it asks the server.
        pod = await dev_cluster.client.get(f"{PODS}/sim")
        assert pod["status"].get("phase") == "Running"

    await eventually(running)
    dev_cluster.faults.fail("get", "pods/exec", code=403)
    done = await kubectl("exec", "sim", "--", "true")
    assert "simulated runtime" in done.stderr  # a `get` rule does not apply
    dev_cluster.faults.clear()
    for args, resource in (
        (("exec", "sim", "--", "true"), "pods/exec"),
        (("port-forward", "pod/sim", "18080:80"), "pods/portforward"),
        (("attach", "sim"), "pods/attach"),
    ):
        dev_cluster.faults.fail("create", resource, code=403)
        refused = await kubectl(*args)
        dev_cluster.faults.clear()
        assert refused.returncode != 0
        assert "simulated runtime" not in refused.stderr, (args, refused.stderr)
        assert f"injected fault: InternalError for create {resource}" in refused.stderr
