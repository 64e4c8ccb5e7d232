"""The real-Ray tier cannot go missing quietly (tests/harness/real_ray_tier.py): a marked test
that skips is a failure under CI=true, and every run ends with the tier's count, also when
pytest-xdist runs the tests in worker processes. Each case runs pytest on a small test file
with the plugin, as `make test` does, and reads its output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.real_ray_tier import HEADLINE

ROOT = Path(__file__).resolve().parents[1]

TESTS = """
import pytest

@pytest.mark.process_runtime
def test_runs():
    pass

@pytest.mark.process_runtime
def test_cannot_run_here():
    pytest.skip("no unshare on this machine")

def test_other():
    pass
"""


def run(tmp_path: Path, *, ci: bool, workers: int) -> tuple[int, list[str]]:
    (tmp_path / "test_tier.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    if ci:
        env["CI"] = "true"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *sys.path])
    args = ["-p", "tests.harness.real_ray_tier", "-p", "no:cacheprovider", "-n", str(workers)]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-rA", "test_tier.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout.strip().splitlines()


@pytest.mark.parametrize("workers", [0, 2])
def test_a_skip_is_counted_on_the_last_line(tmp_path: Path, workers: int) -> None:
    code, lines = run(tmp_path, ci=False, workers=workers)
    assert code == 0, "\n".join(lines)
    assert lines[-1] == f"{HEADLINE}: 1 run, 1 skipped"


@pytest.mark.parametrize("workers", [0, 2])
def test_under_ci_a_skip_is_a_failure(tmp_path: Path, workers: int) -> None:
    code, lines = run(tmp_path, ci=True, workers=workers)
    assert code == 1, "\n".join(lines)
    failed = [line for line in lines if line.startswith("FAILED")]
    assert len(failed) == 1 and "test_cannot_run_here" in failed[0], "\n".join(lines)
    assert "no unshare on this machine" in "\n".join(lines)
    assert lines[-1] == f"{HEADLINE}: 1 run, 1 skipped"
