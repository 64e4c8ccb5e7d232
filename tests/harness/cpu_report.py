"""CPU per test file, opt-in: `PYTEST_CPU_REPORT=<path> pytest ...` (tests/conftest.py registers
it). The suite is CPU-bound on CI's 2 cores, so wall time under load says little about which
file costs what; this records, per file, the worker's user+sys CPU (its own and its reaped
children's: kubectl, pip, the process runtime's pods) and wall time, setup and teardown
included. Each process (xdist worker or a plain run) appends tab-separated rows to <path>, so
runs over one directory at a time add up; at the end the process that ran the session (the
controller under xdist) writes every row so far, summed per file and sorted by CPU, to
<path>.txt and prints the top of it.
"""

from __future__ import annotations

import fcntl
import os
import resource
import time
from collections.abc import Generator
from pathlib import Path

import pytest

ENV = "PYTEST_CPU_REPORT"


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class CpuReport:
    """Sums CPU and wall per test file from before a test's setup to after its teardown."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.files: dict[str, list[float]] = {}  # file -> [cpu s, wall s, tests]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None]:
        cpu, wall = _cpu(), time.monotonic()
        yield
        row = self.files.setdefault(f"{item.location[0]}\t{tier(item)}", [0.0, 0.0, 0.0])
        row[0] += _cpu() - cpu
        row[1] += time.monotonic() - wall
        row[2] += 1

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.files:
            lines = "".join(
                f"{key}\t{cpu:.2f}\t{wall:.2f}\t{int(n)}\n"
                for key, (cpu, wall, n) in self.files.items()
            )
            with self.path.open("a") as out:
                fcntl.flock(out, fcntl.LOCK_EX)
                out.write(lines)
        if not _is_worker(session.config) and self.path.exists():
            table = render(self.path.read_text())
            self.path.with_name(self.path.name + ".txt").write_text(table)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.path.exists():
            terminalreporter.write_sep("-", f"CPU per test file (all of {self.path})")
            lines = render(self.path.read_text()).splitlines(True)
            tail = [line for line in lines if "tier: " in line or line.endswith("total\n")]
            head = lines[:32]
            terminalreporter.write("".join(head + [line for line in tail if line not in head]))


def tier(item: pytest.Item) -> str:
    """The tier a test is counted in: a test of both tiers (real Ray on the real control
    plane) counts as real Ray, whose processes dominate its cost."""
    if item.get_closest_marker("process_runtime") is not None:
        return "real-Ray"
    if item.get_closest_marker("kubernetes") is not None:
        return "real-Kubernetes"
    return "embedded"


def render(rows: str) -> str:
    """Rows summed per file (a file run twice counts twice), sorted by CPU, with totals per
    tier and in all. The wall column sums each test's own wall time across workers, so it is
    worker-seconds, not the run's length."""
    files: dict[str, list[float]] = {}
    tiers: dict[str, list[float]] = {}
    for line in rows.splitlines():
        *key, cpu, wall, n = line.split("\t")
        name, kind = key[0], (key[1] if len(key) > 1 else "?")
        for table, at in ((files, name), (tiers, kind)):
            row = table.setdefault(at, [0.0, 0.0, 0.0])
            row[0] += float(cpu)
            row[1] += float(wall)
            row[2] += int(n)
    order = sorted(files.items(), key=lambda kv: -kv[1][0])
    out = [f"{'cpu s':>8} {'wall s':>8} {'tests':>6}  file\n"]
    out += [f"{c:8.1f} {w:8.1f} {int(n):6d}  {name}\n" for name, (c, w, n) in order]
    for kind, (c, w, n) in sorted(tiers.items()):
        out.append(f"{c:8.1f} {w:8.1f} {int(n):6d}  tier: {kind}\n")
    total = [sum(v[i] for v in files.values()) for i in range(3)]
    out.append(f"{total[0]:8.1f} {total[1]:8.1f} {int(total[2]):6d}  total\n")
    return "".join(out)


def register(config: pytest.Config) -> None:
    """Called from tests/conftest.py's pytest_configure: on only when PYTEST_CPU_REPORT is set."""
    where = os.environ.get(ENV)
    if where:
        config.pluginmanager.register(CpuReport(Path(where).absolute()), "cpu_report")
