"""The real-Kubernetes tier is never silently absent (a pytest plugin, loaded by
tests/conftest.py; docs/design.md §8.2).

- A module marked ``control_planes`` runs its worlds on both control planes: the
  ``control_plane`` fixture is parametrized per module (each backend's world started once,
  pytest orders the module's tests by backend). Elsewhere ``control_plane`` is "embedded".
- A test of such a module that cannot run on Kubernetes says why with
  ``embedded_only("reason")``: that is its skip reason there (and the README's table).
- A test marked ``kubernetes`` (or a ``[kubernetes]`` variant) is of the tier: where the
  binaries cannot be had (no Go) it skips outside CI and fails under ``CI=true``.
- The run ends with one line counting the tier's tests run and skipped, and saying so when
  the tier did not run at all.
"""

from __future__ import annotations

import pytest

from tests.harness import control_planes

MARKER = "kubernetes"
HEADLINE = "real-Kubernetes tier (kube-apiserver, kube-controller-manager, kube-scheduler, etcd)"


class Tally:
    def __init__(self) -> None:
        self.ran: set[str] = set()
        self.skipped: set[str] = set()
        self.declared: set[str] = set()  # embedded_only: skipped by the test's own word

    def line(self) -> str:
        text = (
            f"{HEADLINE}: {len(self.ran)} run, {len(self.skipped)} skipped, "
            f"{len(self.declared)} embedded only"
        )
        if not self.ran and self.skipped:
            text += f"\n{control_planes.NO_TIER}"
        return text


_tally = Tally()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "control_planes: the module's worlds run on the embedded control plane and on "
        "Kubernetes' own (tests/harness/kube_tier.py)",
    )
    config.addinivalue_line(
        "markers", "embedded_only(reason): this test cannot run on Kubernetes' control plane"
    )
    config.addinivalue_line(
        "markers", f"{MARKER}: of the real-Kubernetes tier (needs the built control plane)"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "control_plane" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "control_planes"
    ):
        metafunc.parametrize("control_plane", control_planes.BOTH, scope="module")


def _of_tier(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    plane = callspec.params.get("control_plane") if callspec is not None else None
    return plane == control_planes.KUBERNETES or item.get_closest_marker(MARKER) is not None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _of_tier(item):
            item.add_marker(MARKER)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture (a module's Kubernetes world would start first otherwise)."""
    if not _of_tier(item):
        return
    only = item.get_closest_marker("embedded_only")
    if only is not None:
        reason = only.args[0] if only.args else only.kwargs.get("reason", "")
        item.user_properties.append(("embedded_only", reason))
        pytest.skip(f"embedded only: {reason}")
    control_planes.require(control_planes.KUBERNETES)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if MARKER not in report.keywords:
        return
    if report.skipped:
        if any(key == "embedded_only" for key, _ in report.user_properties):
            _tally.declared.add(report.nodeid)
        else:
            _tally.skipped.add(report.nodeid)
    elif report.when == "call":
        _tally.ran.add(report.nodeid)


def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(_tally.line())


@pytest.fixture(scope="module")
def control_plane() -> str:
    """The embedded control plane, unless the module is marked ``control_planes``."""
    return control_planes.EMBEDDED
