"""A failure whose rendering clashes with CPython 3.11.7's AST check is still one failure, and
the run goes on (tests/harness/report_guard.py, issue #36)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Makes pytest's reading of a traceback entry's source (its ``ast.parse``) raise the clash
#: ``times`` times, as the bug does.
CONFTEST = """
import _pytest._code.code as code
from tests.harness.report_guard import CLASH

pytest_plugins = ["tests.harness.report_guard"]
left = [{times}]
real = code.ExceptionInfoFormatter._getentrysource

def clashing(self, *args, **kwargs):
    if left[0] > 0:
        left[0] -= 1
        raise SystemError(CLASH + " (before=147, after=202)")
    return real(self, *args, **kwargs)

code.ExceptionInfoFormatter._getentrysource = clashing
"""

TESTS = """
def test_fails():
    assert 1 + 1 == 3

def test_after_it_passes():
    pass
"""


def run(tmp_path: Path, times: int, *, guard: bool = True) -> subprocess.CompletedProcess[str]:
    conftest = CONFTEST.format(times=times)
    if not guard:
        conftest = conftest.replace('pytest_plugins = ["tests.harness.report_guard"]', "")
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "test_inner.py").write_text(TESTS)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_clash_once_is_rendered_again(tmp_path: Path) -> None:
    done = run(tmp_path, 1)
    assert "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    assert "INTERNALERROR" not in done.stdout + done.stderr
    assert "assert (1 + 1) == 3" in done.stdout  # pytest's own rendering, the second time


def test_a_clash_twice_is_reported_plain(tmp_path: Path) -> None:
    done = run(tmp_path, 2)
    assert "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    assert "INTERNALERROR" not in done.stdout + done.stderr
    assert "shown plain" in done.stdout and "AssertionError" in done.stdout


def test_without_the_guard_the_clash_ends_the_run(tmp_path: Path) -> None:
    """The guard is what makes the difference: without it the same clash is an internal
    error."""
    done = run(tmp_path, 1, guard=False)
    assert "INTERNALERROR" in done.stdout + done.stderr
