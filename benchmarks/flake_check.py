"""Run the suite N times back to back and name every test that failed in any run.

Run: ``RUNS=3 make flake-check``, or ``.venv/bin/python benchmarks/flake_check.py --runs 3
[-- <pytest arguments>]``. A test that fails once in ten runs passes a single ``make test``
nine times out of ten, so only repetition finds it (issue #36); a run under load (a CPU hog
on both cores, or a second ``make test`` alongside) finds the races sooner. Each run is
``make test``'s pytest command; the failed and errored node ids come from pytest's short
summary (``-ra``). Exits 1 when any test failed in any run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence

#: make test's command (Makefile, `unit`), without --durations (its table would hide the
#: runs), with the short summary asked for even where pyproject.toml's addopts do not apply.
PYTEST = ["-m", "pytest", "-q", "-ra", "--dist", "loadfile", "--no-loadscope-reorder"]
OUTCOMES = ("FAILED ", "ERROR ")


def failed_tests(lines: Iterable[str]) -> set[str]:
    """The node ids named as failed or errored by pytest's short summary lines
    (``FAILED tests/x.py::test_y - reason``); a reason never holds the node id, so it is cut."""
    found = set()
    for line in lines:
        for outcome in OUTCOMES:
            if line.startswith(outcome):
                found.add(line[len(outcome) :].split(" - ", 1)[0].strip())
    return found


def run_once(workers: str, extra: Sequence[str]) -> tuple[int, set[str]]:
    """One pytest run, echoed as it goes; its exit code and the tests that failed in it."""
    # Bytecode on, as in `make test`: each worker would otherwise recompile every test module.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": ""}
    command = [sys.executable, *PYTEST, "-n", workers, *extra]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as proc:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            sys.stdout.write(line)
            lines.append(line)
    return proc.returncode, failed_tests(lines)


def report(counts: Counter[str], runs: int) -> list[str]:
    """One line per test that failed, the most frequent first."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [f"{n}/{runs}  {test}" for test, n in ordered]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the suite N times; name every failure.")
    parser.add_argument("--runs", type=int, default=int(os.environ.get("RUNS", "3")))
    parser.add_argument("--workers", default=os.environ.get("PYTEST_WORKERS", "4"))
    parser.add_argument("pytest_args", nargs="*", help="after --: passed on to pytest")
    args = parser.parse_args(argv)
    counts: Counter[str] = Counter()
    summaries = []
    for run in range(1, args.runs + 1):
        began = time.monotonic()
        code, failed = run_once(args.workers, args.pytest_args)
        if code not in (0, 1) and not failed:
            # Interrupted, a usage or collection error: no test failed, but the run did.
            failed = {f"<pytest exited {code} without a failed test>"}
        counts.update(failed)
        minutes = (time.monotonic() - began) / 60
        summaries.append(f"run {run}/{args.runs}: {len(failed)} failed, {minutes:.1f} min")
    print("\nflake-check: " + "; ".join(summaries))
    if not counts:
        print(f"flake-check: no test failed in {args.runs} run(s)")
        return 0
    print(f"flake-check: {len(counts)} test(s) failed in at least one of {args.runs} run(s):")
    for line in report(counts, args.runs):
        print("  " + line)
    return 1


if __name__ == "__main__":
    sys.exit(main())
