"""KubeRay's own e2e tests (`ray-operator/test/e2e`), unmodified, from the Go module cache, run
against whatever operator serves a kubeconfig (docs/design.md §8.3).

The tests find the cluster as every client-go program does (`$KUBECONFIG`), make a namespace
`test-ns-*` per test, server-side apply their RayClusters and watch what the operator does; only
their pod templates name an image (`rayproject/ray`, which a simulated kubelet never pulls). The
test binary is compiled once per pin into the same cache as the operator.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from devkube.controlplane import build

from . import manifests

PACKAGE = f"{manifests.MODULE}/test/e2e"
#: Its tests that need no real Ray: they judge only what the operator writes (pods, their
#: labels, the RayCluster's status and conditions). The rest (auth, GCS fault tolerance) exec
#: into Ray's head or need Redis.
NO_RAY = (
    "TestRayClusterSingleHostMultiSlice",
    "TestRayClusterMultiHostMultiSlice",
    "TestRayClusterManagedBy",
    "TestRayClusterSuspend",
    "TestRayClusterWithResourceQuota",
    "TestRayClusterScalingDown",
    "TestRayClusterUpgradeStrategy",
)
#: `--- PASS: TestName (1.23s)` for a top-level test (subtests are indented).
OUTCOME = re.compile(r"^--- (PASS|FAIL|SKIP): (\S+) \(([\d.]+)s\)", re.MULTILINE)
#: `=== RUN   TestName`: a test that began (a failure in its cleanup can leave no outcome line).
BEGAN = re.compile(r"^=== RUN\s+([^/\s]+)$", re.MULTILINE)


@dataclass(frozen=True)
class Outcome:
    test: str
    result: str  # PASS, FAIL, SKIP, or NOT RUN (the binary ended before it: a timeout)
    seconds: float


def test_binary() -> Path:
    """`go test -c` of the e2e package at the pinned release, cached beside the operator."""
    target = build.cache_dir(manifests.GOMOD).with_name(
        build.cache_dir(manifests.GOMOD).name + "-e2e"
    )
    binary = target / "e2e.test"
    if binary.exists():
        return binary
    with build._locked(target.with_suffix(".lock")):
        if binary.exists():
            return binary
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false"}
        result = subprocess.run(
            [
                build.go_binary(),
                "test",
                "-c",
                "-trimpath",
                "-o",
                str(staging / "e2e.test"),
                PACKAGE,
            ],
            cwd=build.GOMOD / manifests.GOMOD,
            env=env,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise build.BuildError(f"`go test -c {PACKAGE}` failed:\n{result.stderr[-4000:]}")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return binary


async def run(
    kubeconfig: Path,
    tests: Iterable[str] = NO_RAY,
    *,
    log: Path | None = None,
    go_timeout: str = "20m",
    env: Mapping[str, str] | None = None,
) -> list[Outcome]:
    """Runs the tests one after another (as `go test -p 1` would), verbose, and reads each
    top-level test's outcome from the output; the whole output goes to ``log`` as it comes."""
    names = list(tests)
    binary = await asyncio.to_thread(test_binary)
    if log is None:
        log = Path(tempfile.mkdtemp(prefix="kuberay-e2e-")) / "go-test.log"
    with log.open("wb") as out:  # written as it runs: `tail -f` shows where a run is
        process = await asyncio.create_subprocess_exec(
            str(binary),
            "-test.v",
            f"-test.run=^({'|'.join(names)})$",
            f"-test.timeout={go_timeout}",
            "-test.count=1",
            cwd=binary.parent,
            env={**os.environ, **(env or {}), "KUBECONFIG": str(kubeconfig)},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
        await process.wait()
    text = await asyncio.to_thread(log.read_text, errors="replace")
    found = {
        m.group(2): Outcome(m.group(2), m.group(1), float(m.group(3)))
        for m in OUTCOME.finditer(text)
    }
    began = set(BEGAN.findall(text))
    return [
        found.get(name, Outcome(name, "FAIL" if name in began else "NOT RUN", 0.0))
        for name in names
    ]
