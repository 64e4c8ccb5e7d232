"""The README's "RayJob quickstart", run as pasted on the process runtime: a RayJob whose
cluster has one 2-host TPU v5p slice runs, from a task pinned to each host, a script printing
its TPU_WORKER_ID, TPU_NAME and hostname; the RayJob reaches SUCCEEDED/Complete, `kubectl
logs job/<submitter>` shows both hosts, and the RayCluster is gone after the TTL
(shutdownAfterJobFinishes). The submitter pod runs the real `ray job submit` against the head's
dashboard over the pod network. Then the same RayJob in SidecarMode: the submitter is a
container of the head pod, and `kubectl logs <head> -c ray-job-submitter` shows both hosts.

Run under `flock /tmp/realray.lock`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from raycluster_operator.controller.crds import rayjob_crd_manifest
from tests.harness.examples import readme_block
from tests.harness.ray_world import RayWorld

README = Path(__file__).resolve().parents[2] / "README.md"
EXAMPLE = README.parent / "examples" / "rayjob-tpu-v5p-2x2x2-local.yaml"
BIN = Path(sys.executable).parent
#: A root login shell's PATH (Debian's): all a fresh shell has before the block's export.
LOGIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

pytestmark = pytest.mark.slow(seconds=125)


def readme_rayjob_block() -> str:
    """The quickstart's shell block, whole: what a user pastes."""
    return readme_block("## RayJob quickstart")


async def stop_group(pgid: int, within: float = 60.0) -> None:
    """SIGTERM (how `raycluster-operator dev` is stopped besides Ctrl-C, which a background
    job of a non-interactive shell ignores) to the process group the test started, SIGKILL
    if it is still there after ``within`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        await asyncio.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


async def test_the_readme_rayjob_quickstart(tmp_path: Path) -> None:
    """The block as pasted in a fresh shell of a clone's directory: it exports what it needs,
    starts the dev cluster in the background itself and waits for it."""
    (tmp_path / ".venv").symlink_to(README.parent / ".venv")
    (tmp_path / "examples").symlink_to(README.parent / "examples")
    output = tmp_path / "out.log"
    with output.open("wb") as out:
        # Not a pipe: the backgrounded dev cluster keeps the shell's stdout open.
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-e",
            "-o",
            "pipefail",
            "-c",
            "set -x\n" + readme_rayjob_block(),
            cwd=tmp_path,
            env={"HOME": str(tmp_path), "PATH": LOGIN_PATH, "LANG": "C.UTF-8"},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            await proc.wait()
        finally:
            await stop_group(proc.pid)
    text = output.read_text(errors="replace")
    assert proc.returncode == 0, text[-6000:]
    assert "SUCCEEDED" in text and "Complete" in text, text[-6000:]
    for host in ("0", "1"):
        line = f"TPU_WORKER_ID={host} TPU_NAME=tpu-v5p-0 hostname=tpu-v5p-0-{host}"
        assert line in text, text[-6000:]


async def kubectl(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        *args,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out, _ = await proc.communicate(stdin.encode() if stdin is not None else None)
    text = out.decode(errors="replace")
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {text[-4000:]}"
    return text


async def test_the_rayjob_quickstart_in_sidecar_mode(tmp_path: Path) -> None:
    """The quickstart's RayJob with ``submissionMode: SidecarMode``: no submitter Job; the head
    pod's ``ray-job-submitter`` container submits on localhost, follows the real job to its
    end and exits 0, which completes the RayJob."""
    world = await RayWorld.start(["tpu:v5p:2x2x2:1", "cpu:1"], runtime="process")
    try:
        await world.cluster.apply(rayjob_crd_manifest())
        await world.start_operator(jobs_api_via="head-pod-ip")
        manifest = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
        manifest["metadata"]["name"] = "tpu-sidecar"
        manifest["spec"]["submissionMode"] = "SidecarMode"
        manifest["spec"]["shutdownAfterJobFinishes"] = False  # its logs stay readable
        kubeconfig = world.cluster.write_kubeconfig(tmp_path / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": f"{BIN}:{os.environ['PATH']}"}
        await kubectl(env, "apply", "-f", "-", stdin=yaml.safe_dump(manifest))
        await kubectl(
            env,
            "wait",
            "--for=jsonpath={.status.jobDeploymentStatus}=Complete",
            "rayjob/tpu-sidecar",
            "--timeout=600s",
        )
        status = json.loads(await kubectl(env, "get", "rayjob", "tpu-sidecar", "-o", "json"))
        assert status["status"]["jobStatus"] == "SUCCEEDED", status["status"]
        jobs = json.loads(await kubectl(env, "get", "jobs", "-o", "json"))
        assert jobs["items"] == []  # the head submitted: no submitter Job
        cluster = status["status"]["rayClusterName"]
        head = (
            await kubectl(
                env,
                "get",
                "pods",
                "-l",
                f"ray.io/cluster={cluster},ray.io/node-type=head",
                "-o",
                "jsonpath={.items[0].metadata.name}",
            )
        ).strip()
        pod = json.loads(await kubectl(env, "get", "pod", head, "-o", "json"))
        (submitter,) = [
            c for c in pod["status"]["containerStatuses"] if c["name"] == "ray-job-submitter"
        ]
        assert submitter["state"]["terminated"]["exitCode"] == 0, submitter
        logs = await kubectl(env, "logs", head, "-c", "ray-job-submitter")
        for host in ("0", "1"):
            line = f"TPU_WORKER_ID={host} TPU_NAME=tpu-v5p-0 hostname=tpu-v5p-0-{host}"
            assert line in logs, logs[-6000:]
    finally:
        await world.close()
