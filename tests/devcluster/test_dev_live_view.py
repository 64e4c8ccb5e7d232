"""`dev --watch`: slices as units with their state, redrawn in place on a terminal and appended
when stdout is a pipe, with the next commands to try."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

from raycluster_operator.devcluster.live_view import host_rows, slice_state

ROOT = Path(__file__).resolve().parents[2]


def _host(replica: str, host: str, phase: str = "Running", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "default",
            "name": f"c-tpu-{replica}-{host}",
            "labels": {
                "ray.io/cluster": "c",
                "ray.io/group": "tpu",
                "ray.io/worker-group-replica-index": replica,
                "ray.io/replica-host-index": host,
            },
        },
        "spec": {"nodeName": f"n{host}", "containers": [{}]},
        "status": {"phase": phase, "containerStatuses": [{"ready": phase == "Running"}], **status},
    }


def test_slice_states() -> None:
    assert slice_state([_host("0", "0"), _host("0", "1")]) == "ready"
    assert slice_state([_host("0", "0"), _host("0", "1", "Pending")]) == (
        "creating (1/2 hosts ready)"
    )
    failed = _host("0", "1", "Failed")
    failed["status"]["containerStatuses"] = [
        {"ready": False, "state": {"terminated": {"reason": "Error", "exitCode": 1}}}
    ]
    assert slice_state([_host("0", "0"), failed]) == "broken: host 1 Error 1"
    going = [_host("0", "0"), _host("0", "1")]
    for pod in going:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert slice_state(going) == "deleting"


def test_rows_keep_slices_together_in_index_order() -> None:
    pods = [_host("10", "1"), _host("2", "0"), _host("10", "0"), _host("2", "1")]
    rows = host_rows(pods, lambda pod, phase: f"ray:{pod['metadata']['name']}")
    assert [(r.slice, r.host) for r in rows] == [
        ("tpu-2", "0"),
        ("tpu-2", "1"),
        ("tpu-10", "0"),
        ("tpu-10", "1"),
    ]
    assert rows[0].ray == "ray:c-tpu-2-0"


def _dev(tmp_path: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "raycluster_operator",
        "dev",
        "--runtime",
        "simulated",
        "--watch",
        "--kubeconfig",
        str(tmp_path / "kubeconfig"),
        "--apply",
        str(ROOT / "examples" / "tpu-v6e-4x4.yaml"),
    ]


def _read_until(fd: int, wanted: bytes, seconds: float = 60) -> bytes:
    """Read a pty until `wanted` shows (a hang guard, not a performance limit)."""
    out = b""
    deadline = time.monotonic() + seconds
    while wanted not in out and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    return out


def test_watch_appends_tables_when_stdout_is_a_pipe(tmp_path: Path) -> None:
    process = subprocess.Popen(
        _dev(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    seen = b""
    try:
        os.set_blocking(process.stdout.fileno(), False)
        deadline = time.monotonic() + 60
        while seen.count(b"ready") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            seen += process.stdout.read() or b""
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    text = seen.decode()
    assert "CLUSTER" in text and "STATE" in text
    assert "exec, port-forward and Ray need `--runtime process`" in text
    assert "\x1b[" not in text  # plain text, no cursor movement
    assert text.count("CLUSTER") >= 1


def test_watch_redraws_in_place_on_a_terminal(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    # The terminal's own size decides the layout, not an inherited COLUMNS.
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    process = subprocess.Popen(
        _dev(tmp_path),
        stdin=slave,
        stdout=slave,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        env=env,
    )
    os.close(slave)
    try:
        out = _read_until(master, b"\x1b[32mready")  # a slice state "ready", in green
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        os.close(master)
    text = out.decode(errors="replace")
    assert "STATE" in text and "ready" in text, text
    # rich's Live display moves the cursor up over the previous table instead of appending.
    assert "\x1b[2K" in text or "\x1b[1A" in text or "\x1b[A" in text, repr(text[-2000:])


def test_ctrl_c_ends_the_live_view_even_as_a_pod_changes() -> None:
    """The cancel and a pod event in the same loop turn: the view's wait still ends cancelled
    (Python 3.11's ``wait_for`` returned instead, and `dev --watch` hung on Ctrl-C)."""
    import asyncio

    from raycluster_operator.devcluster.watch import next_change

    async def view(changed: asyncio.Event) -> None:
        while True:
            await next_change(changed, 1.0)
            await asyncio.sleep(0)
            changed.clear()

    async def main() -> bool:
        changed = asyncio.Event()
        task = asyncio.create_task(view(changed))
        await asyncio.sleep(0)
        changed.set()
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=30)  # a hang guard
        return bool(done) and task.cancelled()

    assert asyncio.run(main())
