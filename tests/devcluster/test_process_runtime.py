"""The process runtime with real processes, driven through the kubelet's Runtime protocol."""

from __future__ import annotations

import asyncio
import itertools
import os
import resource
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from devkube.process.container import Backoff
from devkube.process.pod import PodSettings
from devkube.process.runtime import ProcessRuntime

pytestmark = pytest.mark.process_runtime

# A safety net so a broken runtime fails the test instead of hanging it; never a speed limit.
PATIENCE = 30.0


class Events:
    """Records what the runtime reports, as the kubelet's PodEvents would receive it."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, Any]] = []
        self._changed = asyncio.Event()

    def _add(self, item: tuple[str, str, Any]) -> None:
        self.log.append(item)
        self._changed.set()

    def container_running(self, uid: str, container: str, *, ready: bool = True) -> None:
        self._add(("running", container, ready))

    def container_ready(self, uid: str, container: str, ready: bool) -> None:
        self._add(("ready", container, ready))

    def container_exited(self, uid: str, container: str, exit_code: int, reason: str = "") -> None:
        self._add(("exited", container, (exit_code, reason)))

    async def until(self, check: Callable[[], bool]) -> None:
        async with asyncio.timeout(PATIENCE):
            while not check():
                self._changed.clear()
                await self._changed.wait()

    def exits(self, container: str = "main") -> list[tuple[int, str]]:
        return [v for kind, c, v in self.log if kind == "exited" and c == container]


def make_pod(
    name: str, command: list[str], *, uid: str | None = None, **spec: Any
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "ignored", "command": command}
    container.update(spec.pop("container", {}))
    return {
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"},
        "spec": {"containers": [container], "nodeName": "n1", **spec},
    }


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[ProcessRuntime]:
    rt = ProcessRuntime(state_dir=tmp_path, backoff=Backoff(first=0.05, cap=0.2))
    try:
        yield rt
    finally:
        await rt.close()


async def wait_log(rt: ProcessRuntime, name: str, text: str) -> str:
    async with asyncio.timeout(PATIENCE):
        while True:
            log = (rt.read_log("default", name) or b"").decode()
            if text in log:
                return log
            await asyncio.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_stopping_a_pod_kills_every_process_it_started(runtime: ProcessRuntime) -> None:
    events = Events()
    pod = make_pod("p", ["sh", "-c", "sleep 100 & sleep 100 & echo started; wait"])
    runtime.start_pod(pod, "127.1.0.2", events)
    await wait_log(runtime, "p", "started")
    sandbox = runtime.pods["uid-p"].sandbox
    pids = sandbox.pids()
    assert len(pids) >= 3
    await runtime.stop_pod(pod, 1)
    assert not any(alive(p) for p in pids)
    assert sandbox.pids() == []
    assert runtime.pods == {}


async def test_processes_that_ignore_sigterm_die_after_the_grace_period(
    runtime: ProcessRuntime,
) -> None:
    pod = make_pod(
        "stubborn", ["sh", "-c", "trap '' TERM; echo trapped; while :; do sleep 1; done"]
    )
    runtime.start_pod(pod, "127.1.0.3", Events())
    await wait_log(runtime, "stubborn", "trapped")
    pids = runtime.pods["uid-stubborn"].sandbox.pids()
    await runtime.stop_pod(pod, 0.2)
    assert not any(alive(p) for p in pids)


async def test_exit_codes_are_reported_and_a_restart_runs_again(runtime: ProcessRuntime) -> None:
    events = Events()
    pod = make_pod("crash", ["sh", "-c", "echo run; exit 3"])
    runtime.start_pod(pod, "127.1.0.4", events)
    await events.until(lambda: len(events.exits()) == 1)
    assert events.exits() == [(3, "")]
    runtime.restart_container(pod, "main", events)
    await events.until(lambda: len(events.exits()) == 2)
    assert (runtime.read_log("default", "crash") or b"").decode().count("run") == 2


async def test_killed_by_signal_reads_as_128_plus_signal(runtime: ProcessRuntime) -> None:
    events = Events()
    runtime.start_pod(make_pod("sig", ["sh", "-c", "kill -9 $$$$"]), "127.1.0.5", events)
    await events.until(lambda: bool(events.exits()))
    assert events.exits() == [(137, "")]


async def test_fault_injection_reports_the_requested_code(runtime: ProcessRuntime) -> None:
    events = Events()
    pod = make_pod("victim", ["sleep", "100"])
    runtime.start_pod(pod, "127.1.0.6", events)
    await events.until(lambda: ("running", "main", True) in events.log)
    runtime.kill_container(pod, "main", 42, events)
    await events.until(lambda: bool(events.exits()))
    assert events.exits() == [(42, "")]


async def test_a_missing_command_is_a_start_error(runtime: ProcessRuntime) -> None:
    events = Events()
    runtime.start_pod(make_pod("typo", ["no-such-program-xyz"]), "127.1.0.7", events)
    await events.until(lambda: bool(events.exits()))
    assert events.exits() == [(128, "StartError")]


async def test_pod_sees_cluster_names_token_hostname_and_env(runtime: ProcessRuntime) -> None:
    runtime.settings = PodSettings(token="secret-token", ca_pem=b"CA", backoff=Backoff(first=0.05))
    server = {
        "metadata": {"name": "server", "namespace": "default", "labels": {"app": "web"}},
        "status": {"podIP": "127.1.0.20", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    service = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"app": "web"}},
    }
    runtime.observe([server], [service])
    script = (
        "getent hosts web.default.svc.cluster.local; hostname; pwd; "
        "cat /var/run/secrets/kubernetes.io/serviceaccount/token; echo; "
        "cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo; "
        'echo "greeting=$GREETING ip=$MY_IP"; echo "$0 $1"; echo done'
    )
    pod = make_pod(
        "client",
        ["sh", "-c", script],
        hostname="box",
        container={
            "args": ["$(GREETING)", "$$(GREETING)"],
            "workingDir": "/usr",
            "env": [
                {"name": "NAME", "value": "world"},
                {"name": "GREETING", "value": "hello-$(NAME)"},
                {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            ],
        },
    )
    runtime.start_pod(pod, "127.1.0.8", Events())
    log = await wait_log(runtime, "client", "done")
    lines = log.splitlines()
    assert lines[0].split() == [
        "127.1.0.20",
        "web",
        "web.default",
        "web.default.svc",
        "web.default.svc.cluster.local",
    ]
    assert lines[1:7] == [
        "box",
        "/usr",
        "secret-token",
        "default",
        "greeting=hello-world ip=127.1.0.8",
        "hello-world $(GREETING)",
    ]


async def test_hosts_file_follows_the_cluster(runtime: ProcessRuntime) -> None:
    pod = make_pod(
        "watcher", ["sh", "-c", "while :; do getent hosts late || true; sleep 0.05; done"]
    )
    runtime.start_pod(pod, "127.1.0.9", Events())
    await wait_log(runtime, "watcher", "")
    late = {
        "metadata": {"name": "late-pod", "namespace": "default", "labels": {"app": "late"}},
        "status": {"podIP": "127.1.0.30", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    service = {
        "metadata": {"name": "late", "namespace": "default"},
        "spec": {"selector": {"app": "late"}},
    }
    runtime.observe([late], [service])
    await wait_log(runtime, "watcher", "127.1.0.30")


async def test_readiness_probe_against_the_pod_ip(runtime: ProcessRuntime) -> None:
    events = Events()
    server = (
        "import http.server, os, time\n"
        "time.sleep(0.3)\n"
        "http.server.HTTPServer((os.environ['IP'], 8080),"
        " http.server.SimpleHTTPRequestHandler).serve_forever()\n"
    )
    pod = make_pod(
        "web",
        [sys.executable, "-c", server],
        container={
            "env": [{"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 0.1},
        },
    )
    runtime.start_pod(pod, "127.1.0.10", events)
    await events.until(lambda: ("ready", "main", True) in events.log)
    assert events.log[0] == ("running", "main", False)


async def test_failing_liveness_probe_restarts_the_container(runtime: ProcessRuntime) -> None:
    events = Events()
    pod = make_pod(
        "sick",
        ["sleep", "100"],
        terminationGracePeriodSeconds=1,
        container={
            "livenessProbe": {
                "exec": {"command": ["false"]},
                "periodSeconds": 0.05,
                "failureThreshold": 2,
            }
        },
    )
    runtime.start_pod(pod, "127.1.0.11", events)
    await events.until(lambda: bool(events.exits()))
    assert events.exits() == [(143, "")]


async def test_init_containers_run_first_in_the_same_pod(runtime: ProcessRuntime) -> None:
    pod = make_pod(
        "init",
        ["sh", "-c", "cat /tmp/marker; echo main-done"],
        initContainers=[{"name": "prep", "command": ["sh", "-c", "echo prepared > /tmp/marker"]}],
    )
    runtime.start_pod(pod, "127.1.0.12", Events())
    log = await wait_log(runtime, "init", "main-done")
    assert log.startswith("prepared")


async def test_pods_start_when_the_runtime_lives_under_tmp(
    runtime: ProcessRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pod's private /tmp hides the host's /tmp: nothing PID 1 needs may live there."""
    from devkube.process import sandbox

    hidden = tmp_path / "checkout" / "podinit.py"
    hidden.parent.mkdir()
    hidden.write_text(sandbox._PODINIT.read_text())
    monkeypatch.setattr(sandbox, "_PODINIT", hidden)
    sandbox._init_argv.cache_clear()
    try:
        runtime.start_pod(
            make_pod("tmpcheckout", ["sh", "-c", "echo alive"]), "127.1.0.13", Events()
        )
        await wait_log(runtime, "tmpcheckout", "alive")
    finally:
        sandbox._init_argv.cache_clear()


async def test_containers_get_their_whole_open_files_limit(runtime: ProcessRuntime) -> None:
    pod = make_pod("ulimit", ["sh", "-c", 'echo "soft=$(ulimit -n) hard=$(ulimit -Hn) end"'])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
    try:
        runtime.start_pod(pod, "127.1.0.14", Events())
        line = (await wait_log(runtime, "ulimit", "end")).split()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert line[0].split("=")[1] == line[1].split("=")[1] != "256"


async def test_pods_die_with_the_runtime_process(tmp_path: Path) -> None:
    """Even a runtime killed with SIGKILL leaves no pod behind (the init's lifeline closes)."""
    script = (
        "import asyncio, os, sys\n"
        "from pathlib import Path\n"
        "from devkube.process.sandbox import PodSandbox, SandboxFiles\n"
        "async def main():\n"
        "    sb = PodSandbox(SandboxFiles(Path(sys.argv[1])), 'orphan')\n"
        "    await sb.start()\n"
        "    await sb.spawn(['sleep', '300'], dict(os.environ), '/', sb.files.logs / 'log')\n"
        "    print(sb.init_pid, flush=True)\n"
        "    os.kill(os.getpid(), 9)\n"
        "asyncio.run(main())\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, str(tmp_path / "pod"), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    init_pid = int(out.decode().split()[0])
    async with asyncio.timeout(PATIENCE):
        for _ in itertools.count():
            if not alive(init_pid):
                break
            await asyncio.sleep(0.05)
