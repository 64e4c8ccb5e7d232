"""The real-Ray tier is never silently absent (a pytest plugin, loaded by tests/conftest.py).

Tests that run pods as processes (real Ray in tests/e2e/, the process runtime's own tests)
need Linux, root and ``unshare``; elsewhere they skip. A skip is right on a laptop and wrong
in CI, where it would hide a missing tier behind a green run. So:

- such a test carries the ``process_runtime`` marker (tests/e2e/ gets it from its path) and
  this plugin skips it, with the reason, when the machine cannot run it;
- under ``CI=true`` any skip of such a test, for whatever reason (no runtime, no ``ray``
  package), is reported as a failure instead;
- the run ends with one line counting these tests run and skipped. Under pytest-xdist the
  reports reach the controller process, which counts them there from each report's keywords.
"""

from __future__ import annotations

import functools
import os

import pytest

from devkube.process import process_runtime_available

MARKER = "process_runtime"
#: The summary line's opening words (tests/test_real_ray_tier.py reads the line).
HEADLINE = "real-Ray tests (process runtime: Linux, root, unshare)"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@functools.cache
def _unavailable() -> str | None:
    ok, why = process_runtime_available()
    return None if ok else why


class Tally:
    """Outcomes of the marked tests by node id, as the reports arrive."""

    def __init__(self) -> None:
        self.ran: set[str] = set()
        self.skipped: set[str] = set()

    def line(self) -> str:
        return f"{HEADLINE}: {len(self.ran)} run, {len(self.skipped)} skipped"


_tally = Tally()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: needs the dev cluster's process runtime (Linux, root, unshare); a skip "
        "fails under CI=true",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker(MARKER) is not None and (why := _unavailable()) is not None:
        pytest.skip(f"real Ray needs the dev cluster's process runtime: {why}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    report: pytest.TestReport = yield
    if report.skipped and in_ci() and item.get_closest_marker(MARKER) is not None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"CI=true: a real-Ray test may not skip, and this one did: {reason}"
        report.user_properties.append((MARKER, "skipped"))
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if MARKER not in report.keywords:
        return
    if report.skipped or (MARKER, "skipped") in report.user_properties:
        _tally.skipped.add(report.nodeid)
    elif report.when == "call":
        _tally.ran.add(report.nodeid)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The very last line of the run (after pytest's own summary), in the process that
    prints: not in an xdist worker."""
    if hasattr(config, "workerinput"):
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(_tally.line())
