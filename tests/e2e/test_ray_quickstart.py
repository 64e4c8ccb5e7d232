"""The README's "Use the Ray cluster, the KubeRay way", run as written: `kubectl exec` of
`ray status` in the head pod, `kubectl port-forward` of the head service's dashboard port, and
`ray job submit` through it printing each slice host's slice name and worker id. Then a second
RayCluster runs beside the first, each with its own Ray (a network namespace per pod).

Run under `flock /tmp/realray.lock`.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness.examples import EXAMPLES, readme_block
from tests.harness.ray_world import REAL_RAY_MODULE, RayWorld, eventually, module_world, raycluster

pytestmark = [*REAL_RAY_MODULE, pytest.mark.slow(seconds=115)]

FIRST, SECOND = "local-tpu", "second"
EXAMPLE = EXAMPLES / "tpu-v5p-2x2x2-local.yaml"
BIN = Path(sys.executable).parent


def readme_job() -> str:
    """The Python program the README's `ray job submit` runs."""
    block = readme_block("### Use the Ray cluster, the KubeRay way")
    start = block.index("python -c '\n") + len("python -c '\n")
    return block[start : block.index("\n'\n", start) + 1]


# What `make run` applies: the README's commands use its names.
world = module_world(applied=(yaml.safe_load(EXAMPLE.read_text()),))


def kubeconfig(world: RayWorld, tmp: Path) -> Path:
    return world.cluster.write_kubeconfig(tmp / "kubeconfig")


async def run(*argv: str) -> subprocess.CompletedProcess[str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return subprocess.CompletedProcess(list(argv), proc.returncode, out.decode(), err.decode())


async def ray_status_nodes(kubectl: list[str], head: str) -> None:
    """`kubectl exec <head> -- ray status`, until it counts the head and both hosts (lines
    such as " 1 headgroup" and " 2 tpu" under Active and Idle)."""

    async def three() -> None:
        done = await run(*kubectl, "exec", f"pod/{head}", "--", "ray", "status")
        assert done.returncode == 0, done.stderr
        live = done.stdout.split("Active:", 1)[1].split("Pending:", 1)[0]
        counts = [int(n) for n in re.findall(r"^ (\d+) \S+$", live, re.M)]
        assert sum(counts) == 3, done.stdout

    await eventually(three, within=120)


async def test_the_readme_quickstart(world: RayWorld, tmp_path: Path) -> None:
    kubectl = [str(BIN / "kubectl"), f"--kubeconfig={kubeconfig(world, tmp_path)}"]
    head = await world.ray_up(FIRST, workers=2)
    await ray_status_nodes(kubectl, head)

    forward = await asyncio.create_subprocess_exec(
        *kubectl,
        "port-forward",
        f"svc/{FIRST}-head-svc",
        ":8265",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert forward.stdout is not None
        line = (await forward.stdout.readline()).decode()
        match = re.search(r"127\.0\.0\.1:(\d+) -> 8265", line)
        assert match, line + str(await forward.stderr.read() if forward.stderr else "")
        address = f"http://127.0.0.1:{match.group(1)}"

        def dashboard_nodes() -> int:
            with urllib.request.urlopen(f"{address}/nodes?view=summary", timeout=10) as r:
                return len(json.load(r)["data"]["summary"])

        async def dashboard_sees_three() -> None:
            assert await asyncio.to_thread(dashboard_nodes) == 3

        await eventually(dashboard_sees_three, within=120)
        job = await run(
            str(BIN / "ray"),
            "job",
            "submit",
            "--address",
            address,
            "--",
            "python",
            "-c",
            readme_job(),
        )
        assert job.returncode == 0, job.stdout + job.stderr
        printed = [line for line in job.stdout.splitlines() if line.startswith("slice ")]
        assert printed == [
            "slice tpu-v5p-0 worker 0 on tpu-v5p-0-0",
            "slice tpu-v5p-0 worker 1 on tpu-v5p-0-1",
        ], job.stdout
    finally:
        if forward.returncode is None:
            forward.terminate()
        await forward.wait()


NODE_IPS = (
    "import json, ray; ray.init(address='auto', logging_level='ERROR'); "
    "print(json.dumps(sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive'])))"
)


async def test_two_rayclusters_side_by_side_each_with_its_own_ray(
    world: RayWorld, tmp_path: Path
) -> None:
    kubectl = [str(BIN / "kubectl"), f"--kubeconfig={kubeconfig(world, tmp_path)}"]
    await world.cluster.apply(raycluster(SECOND))
    heads = {name: await world.ray_up(name, workers=2) for name in (FIRST, SECOND)}
    for name, head in heads.items():
        await ray_status_nodes(kubectl, head)
        done = await run(*kubectl, "exec", f"pod/{head}", "--", "python", "-c", NODE_IPS)
        assert done.returncode == 0, done.stderr
        own = sorted(p["status"]["podIP"] for p in await world.pods(name))
        assert json.loads(done.stdout.strip().splitlines()[-1]) == own
    # Neither head restarted: the second one did not find the first one's GCS.
    for name in (FIRST, SECOND):
        head: dict[str, Any] = await world.head(name)
        assert head["status"]["containerStatuses"][0]["restartCount"] == 0
