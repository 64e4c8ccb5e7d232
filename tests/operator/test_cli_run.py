"""`raycluster-operator run` as a user starts it: a separate process, a kubeconfig, signals."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import click
import pytest

from raycluster_operator.cli.run import parse_feature_gates
from tests.harness.operator_world import World, cpu_group, eventually, raycluster


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_run_reconciles_serves_probes_and_stops_on_sigterm(
    world: World, tmp_path: Path
) -> None:
    kubeconfig = world.cluster.write_kubeconfig(tmp_path / "kubeconfig")
    health = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "raycluster_operator",
        "run",
        f"--kubeconfig={kubeconfig}",
        "--namespace=default",
        "--no-leader-elect",
        "--metrics-addr=127.0.0.1:0",
        f"--health-addr=127.0.0.1:{health}",
        "--log-format=json",
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await world.apply(raycluster("cli", [cpu_group("w", replicas=2)]))

        async def two_workers() -> None:
            assert len(await world.workers("cli")) == 2

        await eventually(two_workers, within=30)

        async def ready() -> None:
            try:
                async with (
                    aiohttp.ClientSession() as http,
                    http.get(f"http://127.0.0.1:{health}/readyz") as resp,
                ):
                    assert resp.status == 200
            except aiohttp.ClientError as exc:
                raise AssertionError(str(exc)) from exc

        await eventually(ready)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()[-2000:]
    assert b'"level": "info"' in err  # JSON log lines


def test_feature_gates_parse_and_reject_unknown_names() -> None:
    assert parse_feature_gates("") == {"RayMultiHostIndexing": True}
    assert parse_feature_gates("RayMultiHostIndexing=false") == {"RayMultiHostIndexing": False}
    with pytest.raises(click.BadParameter):
        parse_feature_gates("NoSuchGate=true")
    with pytest.raises(click.BadParameter):
        parse_feature_gates("RayMultiHostIndexing")
