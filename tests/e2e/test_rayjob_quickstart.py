"""The README's "RayJob quickstart", run as written on the process runtime: a RayJob whose
cluster has one 2-host TPU v5p slice runs, from a task pinned to each host, a script printing
its TPU_WORKER_ID, TPU_NAME and hostname; the RayJob reaches SUCCEEDED/Complete, `kubectl
logs job/<submitter>` shows both hosts, and the RayCluster is gone after the TTL
(shutdownAfterJobFinishes). The submitter pod runs the real `ray job submit` against the head's
dashboard over the pod network.

Run under `flock /tmp/realray.lock`.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from raycluster_operator.api.rayjob_crd import rayjob_crd_manifest
from tests.harness.ray_world import RayWorld

README = Path(__file__).resolve().parents[2] / "README.md"
EXAMPLE = README.parent / "examples" / "rayjob-tpu-v5p-2x2x2-local.yaml"
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow(seconds=40)


def readme_commands() -> str:
    """The quickstart's shell block after the `dev` and `export` lines (the test starts the
    same dev cluster itself and sets the environment)."""
    text = README.read_text()
    block = text[text.index("## RayJob quickstart") :]
    block = block[block.index("```sh\n") + 6 :]
    block = block[: block.index("```")]
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("export KUBECONFIG"))
    return "\n".join(lines[start + 1 :]) + "\n"


async def test_the_readme_rayjob_quickstart(tmp_path: Path) -> None:
    world = await RayWorld.start(["tpu:v5p:2x2x2:1", "cpu:1"], runtime="process")
    try:
        await world.cluster.apply(rayjob_crd_manifest())
        # What `raycluster-operator dev` does on the process runtime: the operator on the
        # host reaches each head's Jobs API at the head pod's IP.
        await world.start_operator(jobs_api_via="head-pod-ip")
        await world.cluster.apply(yaml.safe_load(EXAMPLE.read_text()))
        kubeconfig = world.cluster.write_kubeconfig(tmp_path / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": f"{BIN}:{os.environ['PATH']}"}
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-ec",
            "set -x\n" + readme_commands(),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        out, _ = await proc.communicate()
        text = out.decode(errors="replace")
        assert proc.returncode == 0, text[-6000:]
        assert "SUCCEEDED" in text and "Complete" in text, text[-6000:]
        for host in ("0", "1"):
            line = f"TPU_WORKER_ID={host} TPU_NAME=tpu-v5p-0 hostname=tpu-v5p-0-{host}"
            assert line in text, text[-6000:]
    finally:
        await world.close()
