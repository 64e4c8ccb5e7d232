"""Memory of `make run`: every process of its tree, by pod and by role, RSS and PSS.

Run (Linux, root; real Ray, so under the lock):
    flock /tmp/realray.lock .venv/bin/python benchmarks/memory.py [--job] [--settle 30]
or, for a `make run` already running, without starting anything:
    .venv/bin/python benchmarks/memory.py --pid $(pgrep -f 'raycluster-operator dev' | head -1)

Without --pid it starts what `make run` starts (`raycluster-operator dev` with the Makefile's
--nodes and `examples/tpu-v5p-2x2x2-local.yaml`, minus the live view), waits until
`kubectl exec <head> -- ray status` counts the head and the slice's two hosts and the tree's
memory stops growing, then measures; with --job it also submits the README's job through
`kubectl port-forward` and measures again. RSS counts a page in every process that maps it
(the dashboard's module processes are forked from one server and share most of theirs); PSS
(/proc/PID/smaps_rollup) divides each shared page among its sharers, so PSS sums to what the
tree really holds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXAMPLE = ROOT / "examples" / "tpu-v5p-2x2x2-local.yaml"
# What `make run` passes (Makefile, target `run`).
NODES = ("--nodes", "tpu:v5p:2x2x2:2", "--nodes", "cpu:1")
SERVICE = "svc/local-tpu-head-svc"
HOSTNAME = re.compile(r"hostname '?([\w.-]+)'?")

# The wrappers around a pod and its containers (process/sandbox.py, builders' `sh -c`).
PLUMBING = ("unshare ", "nsenter ", "sh -c", "/bin/sh -c", "setsid ")
PLUMBING_ROLE = "pod plumbing (unshare, nsenter, sh, podinit)"
# First match wins: a substring of the command line, and the role it names.
ROLES = (
    ("raycluster-operator dev", "dev cluster + operator"),
    ("/raylet/raylet ", "raylet"),
    ("gcs_server", "gcs_server"),
    ("kuberay-autoscaler", "autoscaler sidecar (ray kuberay-autoscaler)"),
    ("dashboard/dashboard.py", "dashboard (head process)"),
    ("ray-dashboard-", "dashboard module"),
    ("multiprocessing.forkserver", "dashboard module forkserver"),
    ("multiprocessing.resource_tracker", "dashboard module resource tracker"),
    ("ray::DashboardAgent", "dashboard agent"),
    ("dashboard/agent.py", "dashboard agent"),
    ("ray::RuntimeEnvAgent", "runtime-env agent"),
    ("runtime_env/agent/main.py", "runtime-env agent"),
    ("log_monitor.py", "log monitor"),
    ("autoscaler/_private/monitor.py", "autoscaler monitor (v1)"),
    ("ray.util.client.server", "ray client server"),
    ("ray::IDLE", "idle worker"),
    ("ray::JobSupervisor", "job supervisor actor"),
    ("ray::", "worker"),
    ("default_worker.py", "worker (starting)"),
    ("ray start", "ray start --block"),
    ("ray job", "ray job submit"),
    ("PID 1 of a pod", PLUMBING_ROLE),
)


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    cmdline: str
    rss_kb: int
    pss_kb: int


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def _field(text: str, name: str) -> int:
    match = re.search(rf"^{name}:\s+(\d+) kB", text, re.M)
    return int(match.group(1)) if match else 0


def processes() -> dict[int, Proc]:
    out: dict[int, Proc] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        status = _read(f"/proc/{entry}/status")
        ppid = re.search(r"^PPid:\s+(\d+)", status, re.M)
        if ppid is None:
            continue
        cmdline = _read(f"/proc/{entry}/cmdline").replace("\0", " ").strip()
        out[int(entry)] = Proc(
            pid=int(entry),
            ppid=int(ppid.group(1)),
            cmdline=cmdline,
            rss_kb=_field(status, "VmRSS"),
            pss_kb=_field(_read(f"/proc/{entry}/smaps_rollup"), "Pss"),
        )
    return out


def _pid_namespace(pid: int) -> int:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return 0


def tree(root: int, table: dict[int, Proc]) -> Iterator[tuple[Proc, str]]:
    """`root` and its descendants, each with the pod it runs in ("" outside pods).

    A pod's sandbox is `unshare ... sh -c '... hostname <pod> ...'` whose child is the pod's
    PID 1 (process/sandbox.py); its containers are entered with nsenter, so a process belongs
    to the pod whose PID namespace it is in, wherever it hangs in the tree."""
    children: dict[int, list[int]] = defaultdict(list)
    for proc in table.values():
        children[proc.ppid].append(proc.pid)
    found: list[Proc] = []
    stack = [root]
    while stack:
        proc = table.get(stack.pop())
        if proc is not None:
            found.append(proc)
            stack.extend(children.get(proc.pid, []))
    pods: dict[int, str] = {}
    for proc in found:
        named = HOSTNAME.search(proc.cmdline)
        if proc.cmdline.startswith("unshare ") and named:
            for child in children.get(proc.pid, []):
                pods[_pid_namespace(child)] = named.group(1)
    for proc in found:
        yield proc, pods.get(_pid_namespace(proc.pid), "")


def role(cmdline: str) -> str:
    if cmdline.startswith(PLUMBING):
        return PLUMBING_ROLE
    for needle, name in ROLES:
        if needle in cmdline:
            return name
    return "other: " + cmdline[:40]


def report(root: int, title: str, *, every: bool = False) -> int:
    """Print the tables (with `every`, each process too); the tree's RSS in kB."""
    rows = [(pod or "-", role(p.cmdline), p) for p, pod in tree(root, processes())]
    if every:
        for pod, name, p in sorted(rows, key=lambda r: (r[0], r[1])):
            print(
                f"{p.pid:>7} {pod:<24} {p.rss_kb / 1024:>6.0f} {p.pss_kb / 1024:>6.0f}  "
                f"{name:<32} {p.cmdline[:150]}"
            )
    by_role: dict[tuple[str, str], list[Proc]] = defaultdict(list)
    for pod, name, proc in rows:
        by_role[(pod, name)].append(proc)
    print(f"\n== {title}: {len(rows)} processes ==")
    print(f"{'pod':<34} {'role':<46} {'n':>3} {'RSS MB':>8} {'PSS MB':>8}")
    pods: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for (pod, name), procs in sorted(by_role.items(), key=lambda kv: (kv[0][0], -_rss(kv[1]))):
        rss, pss = _rss(procs), sum(p.pss_kb for p in procs)
        pods[pod][0] += rss
        pods[pod][1] += pss
        print(f"{pod:<34} {name:<46} {len(procs):>3} {rss / 1024:>8.0f} {pss / 1024:>8.0f}")
    print(f"{'':-<102}")
    for pod, (rss, pss) in sorted(pods.items()):
        print(f"{pod:<34} {'(pod total)':<46} {'':>3} {rss / 1024:>8.0f} {pss / 1024:>8.0f}")
    total_rss = sum(p.rss_kb for _, _, p in rows)
    total_pss = sum(p.pss_kb for _, _, p in rows)
    print(f"{'ALL':<34} {'':<46} {len(rows):>3} {total_rss / 1024:>8.0f} {total_pss / 1024:>8.0f}")
    return total_rss


def _rss(procs: list[Proc]) -> int:
    return sum(p.rss_kb for p in procs)


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "kubectl"), f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def wait_for_ray(kubeconfig: Path, nodes: int, limit: float) -> float:
    """Seconds until `ray status` in the head pod counts `nodes` active nodes."""
    began = time.monotonic()
    while time.monotonic() - began < limit:
        head = kubectl(kubeconfig, "get", "pod", "-l", "ray.io/node-type=head", "-o", "name")
        name = head.stdout.strip()
        if name:
            status = kubectl(kubeconfig, "exec", name, "-c", "ray-head", "--", "ray", "status")
            active = status.stdout.split("Active:", 1)[-1].split("Pending:", 1)[0]
            if sum(int(n) for n in re.findall(r"^ (\d+) \S+$", active, re.M)) == nodes:
                return time.monotonic() - began
        time.sleep(3)
    raise TimeoutError(f"Ray did not count {nodes} nodes in {limit:.0f} s")


def settle(root: int, quiet: float, limit: float) -> None:
    """Wait until the tree's RSS has not grown by more than 1% for `quiet` seconds."""
    began = time.monotonic()
    best, since = 0, time.monotonic()
    while time.monotonic() - began < limit:
        now = sum(p.rss_kb for p, _ in tree(root, processes()))
        if now > best * 1.01:
            best, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(2)


def readme_job() -> str:
    """The Python program of the README's `ray job submit ... python -c '...'`."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("### Use the Ray cluster, the KubeRay way") :]
    start = block.index("python -c '\n") + len("python -c '\n")
    return block[start : block.index("\n'\n", start) + 1]


def submit_job(kubeconfig: Path) -> str:
    """The README's job through `kubectl port-forward`; its output."""
    forward = subprocess.Popen(
        [str(BIN / "kubectl"), f"--kubeconfig={kubeconfig}", "port-forward", SERVICE, ":8265"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert forward.stdout is not None
        line = forward.stdout.readline()
        port = re.search(r"127\.0\.0\.1:(\d+) ->", line)
        assert port, line
        address = f"http://127.0.0.1:{port.group(1)}"
        job_argv = ["python", "-c", readme_job()]
        job = subprocess.run(
            [str(BIN / "ray"), "job", "submit", "--address", address, "--", *job_argv],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        return job.stdout + job.stderr
    finally:
        forward.terminate()
        forward.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pid", type=int, help="measure this running tree, start nothing")
    parser.add_argument("--apply", type=Path, default=EXAMPLE)
    parser.add_argument("--settle", type=float, default=30, help="quiet seconds before measuring")
    parser.add_argument("--job", action="store_true", help="also measure after the README job")
    parser.add_argument("--every", action="store_true", help="list every process too")
    args = parser.parse_args()
    if args.pid:
        report(args.pid, f"process tree of {args.pid}", every=args.every)
        return
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        began = time.monotonic()
        dev = subprocess.Popen(
            [
                str(BIN / "raycluster-operator"),
                "dev",
                *NODES,
                *("--apply", str(args.apply)),
                *("--kubeconfig", str(kubeconfig)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(Path(tmp) / "dev.log", "w"),  # noqa: SIM115 - closed with the process
            cwd=ROOT,
        )
        try:
            while not kubeconfig.exists():
                if dev.poll() is not None:
                    raise SystemExit((Path(tmp) / "dev.log").read_text()[-3000:])
                time.sleep(0.5)
            waited = wait_for_ray(kubeconfig, 3, 300)
            print(f"ray status counts 3 nodes {time.monotonic() - began:.0f} s after start")
            del waited
            settle(dev.pid, args.settle, 240)
            report(dev.pid, "make run, before any job", every=args.every)
            if args.job:
                output = submit_job(kubeconfig)
                print("".join(f"  job: {x}\n" for x in output.splitlines() if "slice " in x))
                settle(dev.pid, args.settle, 240)
                report(dev.pid, "make run, after one job", every=args.every)
        finally:
            dev.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                dev.wait(60)
            if dev.poll() is None:
                dev.kill()
                dev.wait()


if __name__ == "__main__":
    main()
