"""Every README shell block a user pastes runs as pasted (issue 38 item 5).

Each block is taken from README.md as it stands and run with `bash -e -o pipefail` in a fresh
shell, in a directory laid out like a clone after `make install` (`.venv` and `examples/`),
with nothing in the environment but a login shell's PATH and what the README says to set: its one
`export KUBECONFIG=... PATH=...` line (the quickstart's), put before the blocks that do not
start with it. A failing command fails the test with the block's output.

The dev clusters are the ones the README starts, on the simulated runtime:
- the quickstart block on `make run`'s cluster (the Makefile's nodes and example);
- the scaling, drain and quota blocks, in the README's order, on the cluster its
  "Scaling by hand" block starts (that command, as pasted, in the background).

Real-Ray blocks run elsewhere, as written: "Use the Ray cluster, the KubeRay way" in
tests/e2e/test_ray_quickstart.py, the slice-reservation program in
tests/e2e/test_ray_slice_reservation.py, the RayJob quickstart (the whole block, its
background dev cluster included) in tests/e2e/test_rayjob_quickstart.py.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.examples import EXAMPLES, README, ROOT, readme_block

pytestmark = pytest.mark.slow(seconds=60)

#: A root login shell's PATH (Debian's): all a fresh shell has before the README's export.
LOGIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
EXPORT = re.compile(r"^export KUBECONFIG=.*$", re.M)
#: The Makefile's `run` target: its nodes and example (the test adds `--runtime simulated`).
MAKE_RUN = re.compile(r"raycluster-operator dev (.*)$", re.M)


def clone(tmp: Path) -> Path:
    """A directory shaped like the checkout: the blocks use $PWD/.venv and examples/."""
    (tmp / ".venv").symlink_to(ROOT / ".venv")
    (tmp / "examples").symlink_to(EXAMPLES)
    return tmp


def fresh_env(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "PATH": LOGIN_PATH, "LANG": "C.UTF-8"}


def export_line() -> str:
    match = EXPORT.search(readme_block("## Quickstart with kubectl"))
    assert match, "the quickstart no longer says what to export"
    return match.group(0)


def run_block(cwd: Path, block: str, *, timeout: float = 300) -> str:
    script = block if EXPORT.search(block) else f"{export_line()}\n{block}"
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env=fresh_env(cwd),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    return done.stdout


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Dev clusters started by the test, stopped (SIGINT, as Ctrl-C) when it ends."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    for proc in started:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_dev(cwd: Path, command: str, started: list[subprocess.Popen[bytes]]) -> None:
    """Start `command` as a user would in another terminal; return once its kubeconfig is
    written (what the user waits for: the live table appears)."""
    kubeconfig = cwd / ".devcluster" / "kubeconfig"
    kubeconfig.unlink(missing_ok=True)
    log = (cwd / "dev.log").open("ab")
    proc = subprocess.Popen(
        ["bash", "-c", f"exec {command}"], cwd=cwd, env=fresh_env(cwd), stdout=log, stderr=log
    )
    started.append(proc)
    deadline = time.monotonic() + 120
    while not kubeconfig.exists():
        assert proc.poll() is None, (cwd / "dev.log").read_text()
        assert time.monotonic() < deadline, (cwd / "dev.log").read_text()
        time.sleep(0.1)


def test_the_quickstart_block_on_make_runs_cluster(
    tmp_path: Path, dev: list[subprocess.Popen[bytes]]
) -> None:
    cwd = clone(tmp_path)
    makefile = (ROOT / "Makefile").read_text()
    match = MAKE_RUN.search(makefile)
    assert match, "the Makefile's run target moved"
    args = match.group(1).replace("--watch", "--runtime simulated")
    start_dev(cwd, f".venv/bin/raycluster-operator dev {args}", dev)
    out = run_block(cwd, readme_block("## Quickstart with kubectl"))
    assert "local-tpu" in out


def test_the_scaling_drain_and_quota_blocks_in_order(
    tmp_path: Path, dev: list[subprocess.Popen[bytes]]
) -> None:
    cwd = clone(tmp_path)
    heading = "Scaling by hand is clearer"
    (command,) = [line for line in readme_block(heading).splitlines() if line.strip()]
    start_dev(cwd, command, dev)
    text = README.read_text()
    scaling = text[text.index(heading) :]
    scaling = scaling[scaling.index("```sh\n") + 6 :]
    run_block(cwd, _second_block(scaling))
    drained = run_block(cwd, readme_block("## Maintenance and drains"))
    assert "drained" in drained
    assert "is moved off its nodes" in drained  # the NodeDrain Event: moved, not evicted
    run_block(cwd, readme_block("## Shared clusters: quotas"))


def _second_block(text: str) -> str:
    """The ```sh block after the one ``text`` starts inside of."""
    rest = text[text.index("```") + 3 :]
    rest = rest[rest.index("```sh\n") + 6 :]
    return rest[: rest.index("```")]
