from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from devkube.nodes import build_nodes, parse_spec
from devkube.process import sandbox
from devkube.process.probespec import ProbeSpec
from devkube.process.probing import probe_once
from devkube.process.runtime import loopback_nodes, service_env


def test_nodes_get_distinct_loopback_pod_ranges_and_keep_everything_else() -> None:
    nodes = build_nodes(parse_spec(None))
    adapted = loopback_nodes(nodes)
    cidrs = [n["spec"]["podCIDR"] for n in adapted]
    assert all(c.startswith("127.1.") and c.endswith(".0/24") for c in cidrs)
    assert len(set(cidrs)) == len(cidrs)
    many = loopback_nodes([nodes[0]] * 300)
    assert many[256]["spec"]["podCIDR"] == "127.2.0.0/24"
    for before, after in zip(nodes, adapted, strict=True):
        assert after["metadata"] == before["metadata"]
        internal = [a for a in after["status"]["addresses"] if a["type"] == "InternalIP"]
        assert [a["address"] for a in internal] == ["127.0.0.1"]
        assert before["spec"]["podCIDR"] != after["spec"]["podCIDR"], "input is not mutated"


def test_service_env_points_in_cluster_clients_at_the_api_server() -> None:
    env = service_env("https://127.0.0.1:40123")
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert env["KUBERNETES_SERVICE_PORT"] == env["KUBERNETES_SERVICE_PORT_HTTPS"] == "40123"
    assert env["KUBERNETES_PORT"] == "tcp://127.0.0.1:40123"


async def test_tcp_probe_passes_only_while_something_listens() -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def no_exec(argv: Any, seconds: float) -> int:
        raise AssertionError("not an exec probe")

    spec = ProbeSpec(kind="tcp", port=port)
    assert await probe_once(spec, "127.0.0.1", no_exec)
    server.close()
    await server.wait_closed()
    assert not await probe_once(spec, "127.0.0.1", no_exec)


async def test_exec_probe_passes_on_exit_zero() -> None:
    async def run(argv: Any, seconds: float) -> int:
        return 0 if list(argv) == ["true"] else 1

    assert await probe_once(ProbeSpec(kind="exec", command=("true",)), "", run)
    assert not await probe_once(ProbeSpec(kind="exec", command=("false",)), "", run)


def test_unavailability_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox.process_runtime_available.cache_clear()
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    try:
        ok, why = sandbox.process_runtime_available()
    finally:
        sandbox.process_runtime_available.cache_clear()
    assert not ok
    assert "root" in why


def test_a_checkout_under_tmp_stays_visible_through_the_private_tmp(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sandbox.sys, "prefix", "/tmp/clone-x/.venv")
    monkeypatch.setattr(sandbox.sys, "base_prefix", "/usr")
    monkeypatch.setattr(sandbox.sys, "executable", "/tmp/clone-x/.venv/bin/python")
    monkeypatch.chdir("/")
    assert sandbox._host_dirs_under_tmp() == [Path("/tmp/clone-x")]
    script = sandbox._setup_script(sandbox.SandboxFiles(tmp_path), "h")
    assert f"mount --bind /tmp/clone-x {tmp_path / 'tmp' / 'clone-x'}" in script
    assert script.index("clone-x") < script.index(f"mount --rbind {tmp_path / 'tmp'} /tmp")
