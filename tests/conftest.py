"""Shared fixtures: a running dev cluster, a kubeconfig for it, and the real kubectl (the
pieces live in tests/harness/)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from devkube import DevCluster
from tests.harness import cpu_report, waiting
from tests.harness import kubectl as kubectl_bin
from tests.harness.cluster import running_cluster

#: The real-Ray and real-Kubernetes tiers: skipped (a failure under CI=true) where they cannot
#: run here, and counted on the run's last lines.
pytest_plugins = [
    "tests.harness.real_ray_tier",
    "tests.harness.kube_tier",
    "tests.harness.report_guard",
]
#: Where every file starts real Ray in process-runtime pods (a minute or more a file): such
#: files are `slow` as a whole, whatever their tests say.
REAL_RAY = "tests/e2e/"
#: Where tests start dev clusters and operators (seconds a test, often a world a test).
WORLDS = (
    "tests/operator/",
    "tests/hardening/",
    "tests/rayjob/",
    "tests/ray/",
    "tests/kuberay/",
    "tests/devcluster/test_process_",
    "tests/test_install_kustomize.py",
    "tests/test_install_helm",
)


def pytest_configure(config: pytest.Config) -> None:
    """`PYTEST_CPU_REPORT=<path>`: CPU and wall per test file (tests/harness/cpu_report.py)."""
    cpu_report.register(config)
    config.addinivalue_line(
        "markers",
        "by_hand(reason): a test `make test` leaves out (-m 'not by_hand') for the reason "
        "given; run it by name",
    )


def _where(item: pytest.Item) -> str:
    return str(item.path).replace("\\", "/")


def _tier(item: pytest.Item, slow: set[Path]) -> int:
    """0: a file with a `slow` test (real Ray, the wheel build); 1: worlds; 2: the rest."""
    if item.path in slow:
        return 0
    where = _where(item)
    return 1 if any(f"/{part}" in where for part in WORLDS) else 2


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first. `make test` hands whole files to its workers in this order
        (`--dist loadfile --no-loadscope-reorder`): a file of minutes started last would run on
        alone at the end (xdist's own order, most tests first, put the one-test real-Ray files
        last). Within a tier, the files that declare the most seconds go first, then those with more
    tests (xdist's own guess)."""
    for item in items:
        if f"/{REAL_RAY}" in _where(item):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.process_runtime)
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    count: dict[Path, int] = {}
    seconds: dict[Path, float] = {}
    for item in items:
        count[item.path] = count.get(item.path, 0) + 1
        seconds[item.path] = max(seconds.get(item.path, 0.0), _declared_seconds(item))
    items.sort(key=lambda item: (_tier(item, slow), -seconds[item.path], -count[item.path]))


def _declared_seconds(item: pytest.Item) -> float:
    """What a file says it takes (`pytest.mark.slow(seconds=...)`, from a quiet make test):
    test counts say little of real-Ray files, whose one test can outlast a file of twenty."""
    return max((float(m.kwargs.get("seconds", 0)) for m in item.iter_markers("slow")), default=0)


@pytest.fixture
async def dev_cluster() -> AsyncIterator[DevCluster]:
    """A started dev cluster with the default nodes (2 v6e 4x4 pools, a GB200 domain, 4 CPU),
    private to the test. A module whose tests need no private one shares `module_cluster`."""
    async with running_cluster(kubelet_delay=0.2) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="module")
async def private_cluster() -> AsyncIterator[DevCluster]:
    """`dev_cluster`'s private cluster under another name, for the tests of a module that hands
    out `module_cluster` as its `dev_cluster` and that need a cluster of their own (faults,
    failed or stopped nodes, assertions on everything in a namespace). Such a test does not
    take `kubectl`, which talks to the module's `dev_cluster`. It runs on the module's loop,
    as such a module's tests do."""
    async with running_cluster(kubelet_delay=0.2) as cluster:
        yield cluster


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_cluster() -> AsyncIterator[DevCluster]:
    """`dev_cluster`'s cluster, one for every test of a module (docs/design.md §8.1). Such a
    module runs on one event loop and hands it out as its `dev_cluster`:

        pytestmark = pytest.mark.asyncio(loop_scope="module")

        @pytest.fixture
        def dev_cluster(module_cluster: DevCluster) -> DevCluster:
            return module_cluster

    and its tests keep to names of their own (a namespace each, or distinct names): nothing
    is cleaned between them. Faults, node changes and grants to shared names stay private."""
    async with running_cluster(kubelet_delay=0.2) as cluster:
        yield cluster


@pytest.fixture
def kubeconfig_path(dev_cluster: DevCluster, tmp_path: Path) -> Path:
    return dev_cluster.write_kubeconfig(tmp_path / "kubeconfig")


Kubectl = kubectl_bin.Run


@pytest.fixture
def kubectl(kubeconfig_path: Path) -> Kubectl:
    """`await kubectl("get", "pods", "-o", "json")`: runs the real kubectl against the dev
    cluster without blocking the event loop the cluster runs on."""
    return kubectl_bin.runner(kubeconfig_path)


Eventually = Callable[..., Awaitable[None]]


@pytest.fixture
def eventually() -> Eventually:
    """`await eventually(check)`: retry an async assertion until it passes. The timeout only
    turns a hang into a failure; it is not a performance limit."""

    return waiting.eventually
