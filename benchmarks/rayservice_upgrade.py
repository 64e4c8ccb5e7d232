"""RayService on real Ray Serve, the README's quickstart carried on past `make test`: its three
blocks, the third (a NewCluster upgrade, the worker image changed) and then the kill of one
host's Ray during a steady stream of requests that follows the serve service as a cluster IP
would.

Run (as root, Linux, with Ray Serve): flock /tmp/realray.lock .venv/bin/python
benchmarks/rayservice_upgrade.py

Prints `E2E-FIGURES` lines: time from the patch to the first answer of the new cluster and to
the old cluster's deletion, answered and failed requests in each phase; after the host kill,
when the slice left the service and came back. Exits 1 if a phase failed requests beyond what
the issue allows (0 during the upgrade; during the kill, only requests on the slice). Two Ray
clusters run at once (about 5 GB, 3-4 minutes on 2 cores): a benchmark, not part of the suite,
whose 100-200 s of two real Ray clusters would not fit the suite's 15-minute budget.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
import tempfile
from pathlib import Path

import yaml

from raycluster_operator.controller.crds import rayservice_crd_manifest

sys.path.insert(0, str(Path(__file__).parents[1]))  # the checkout: its tests' helpers
from tests.e2e import test_rayservice_quickstart as quickstart
from tests.harness.ray_world import LIGHT_ENV, RayWorld


async def main() -> None:
    quickstart.require_serve()
    world = await RayWorld.start(quickstart.NODES, runtime="process")
    try:
        settings = world.runtime.settings
        path = os.pathsep.join(
            p for p in (str(quickstart.APP_DIR), os.environ.get("PYTHONPATH")) if p
        )
        world.runtime.settings = dataclasses.replace(
            settings, base_env={**settings.base_env, **LIGHT_ENV, "PYTHONPATH": path}
        )
        await world.cluster.apply(rayservice_crd_manifest())
        await world.start_operator(jobs_api_via="head-pod-ip", serve_api_via="head-pod-ip")
        await world.cluster.apply(yaml.safe_load(quickstart.EXAMPLE.read_text()))
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = world.cluster.write_kubeconfig(Path(tmp) / "kubeconfig")
            path_env = f"{quickstart.BIN}:{os.environ['PATH']}"
            env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": path_env}
            first, second, third = quickstart.readme_blocks()
            await quickstart.shell(env, first)
            # The v2 code: its replicas count what they served, which tells a new replica.
            await quickstart.shell(env, second)
            await quickstart.upgrade_and_host_kill(world, env, third)
    finally:
        await world.close()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except AssertionError as failed:
        print(f"FAILED: {failed}"[:4000], file=sys.stderr)
        sys.exit(1)
