"""`make flake-check` (benchmarks/flake_check.py) names a test that failed in only one run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "flake_check.py"

INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
# Fails the first time it runs in its directory, passes after: a flake, made deterministic.
FLIP = """
from pathlib import Path


def test_flip() -> None:
    mark = Path(__file__).with_name("ran")
    first = not mark.exists()
    mark.touch()
    assert not first


def test_steady() -> None:
    pass
"""


def test_a_test_failing_in_one_run_of_two_is_named_with_its_count(tmp_path: Path) -> None:
    (tmp_path / "test_flip.py").write_text(FLIP)
    (tmp_path / "pytest.ini").write_text(INI)
    command = [sys.executable, str(SCRIPT), "--runs", "2", "--workers", "0"]
    done = subprocess.run(
        [*command, "--", "-p", "no:cacheprovider", "test_flip.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    summary = done.stdout[done.stdout.index("\nflake-check: ") :]
    assert "run 1/2: 1 failed" in summary and "run 2/2: 0 failed" in summary
    assert "  1/2  test_flip.py::test_flip\n" in summary
    assert "test_steady" not in summary


def test_runs_without_failures_exit_0(tmp_path: Path) -> None:
    (tmp_path / "test_steady.py").write_text("def test_steady() -> None:\n    pass\n")
    (tmp_path / "pytest.ini").write_text(INI)
    command = [sys.executable, str(SCRIPT), "--runs", "2", "--workers", "0"]
    done = subprocess.run(
        [*command, "--", "-p", "no:cacheprovider"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "flake-check: no test failed in 2 run(s)" in done.stdout
