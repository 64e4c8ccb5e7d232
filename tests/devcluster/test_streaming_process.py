"""kubectl exec, exec -it, cp, port-forward and logs -f against the process runtime, with the
real kubectl over WebSocket (run under `flock /tmp/realray.lock`)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import struct
import subprocess
import termios
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from test_process_cluster import SERVER, python_pod, status_of

from devkube import DevCluster
from tests.harness import waiting
from tests.harness.cluster import running_cluster
from tests.harness.kubectl import kubectl_binary

#: One process-runtime cluster for the module's tests, each with pods of its own names, and
#: one `web` pod and Service for those that only exec, copy or forward into it (§8.1).
pytestmark = [
    pytest.mark.process_runtime,
    pytest.mark.asyncio(loop_scope="module"),
]

PODS = "/api/v1/namespaces/default/pods"


SERVICES = "/api/v1/namespaces/default/services"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def process_cluster() -> AsyncIterator[DevCluster]:
    async with running_cluster(runtime="process") as cluster:
        yield cluster


@pytest.fixture
def dev_cluster(process_cluster: DevCluster) -> DevCluster:
    """Overrides the shared fixture, so `kubectl` talks to this cluster."""
    return process_cluster


async def running(cluster: DevCluster, eventually: Any, name: str) -> None:
    async def check() -> None:
        status = await status_of(cluster, name)
        ready = {c["type"]: c["status"] for c in status.get("conditions") or []}
        assert status.get("phase") == "Running" and ready.get("Ready") == "True", status

    await eventually(check, within=60)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def web(process_cluster: DevCluster) -> DevCluster:
    """A pod serving HTTP on its IP:8080 behind a Service `web`, working in /tmp/work."""
    dev_cluster = process_cluster
    pod = python_pod(
        "web",
        SERVER,
        metadata={"labels": {"app": "web"}},
        container={
            "workingDir": "/tmp/work",
            "env": [
                *python_pod("x", "")["spec"]["containers"][0]["env"],
                {"name": "GREETING", "value": "hi there"},
            ],
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
        },
    )
    await dev_cluster.client.create(PODS, pod)
    await dev_cluster.client.create(
        SERVICES,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )
    await running(dev_cluster, waiting.eventually, "web")
    return dev_cluster


async def test_exec_runs_in_the_pod_with_its_env_and_workdir_and_exit_code(
    web: DevCluster, kubectl: Any
) -> None:
    done = await kubectl(
        "exec",
        "web",
        "--",
        "sh",
        "-c",
        'echo "$GREETING from $(hostname) in $(pwd)"; echo oops >&2; exit 3',
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == "hi there from web in /tmp/work\n"
    assert "oops" in done.stderr
    # The command sees the pod's processes, not the host's: its PID namespace.
    ps = await kubectl("exec", "web", "--", "sh", "-c", "ls /proc | grep -c '^[0-9]'")
    assert ps.returncode == 0, ps.stderr
    assert int(ps.stdout) < 10
    ok = await kubectl("exec", "web", "-c", "main", "--", "true")
    assert (ok.returncode, ok.stderr) == (0, "")


async def test_exec_with_stdin_and_a_missing_container(web: DevCluster, kubectl: Any) -> None:
    data = "".join(f"line {i}\n" for i in range(20000))
    done = await kubectl("exec", "-i", "web", "--", "sh", "-c", "wc -l; exit 0", input=data)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "20000"
    missing = await kubectl("exec", "web", "-c", "nope", "--", "true")
    assert missing.returncode != 0
    assert "container nope is not valid for pod web" in missing.stderr


async def test_exec_it_through_a_pseudo_terminal(web: DevCluster, kubeconfig_path: Path) -> None:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 111, 0, 0))
    proc = await asyncio.create_subprocess_exec(
        kubectl_binary(),
        f"--kubeconfig={kubeconfig_path}",
        "exec",
        "-it",
        "web",
        "--",
        "sh",
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    os.write(master, b"tty; stty size; echo answer=$((6*7)); exit 5\n")
    loop = asyncio.get_running_loop()
    output = b""

    def read() -> bytes:
        try:
            return os.read(master, 65536)
        except OSError:
            return b""

    while chunk := await loop.run_in_executor(None, read):
        output += chunk
    code = await proc.wait()
    os.close(master)
    text = output.decode(errors="replace")
    assert code == 5, text
    assert "answer=42" in text
    assert re.search(r"/dev/pts/\d+", text), text
    # kubectl sent its terminal's size (rows columns), and the pod's terminal took it.
    assert re.search(r"^33 111\r?$", text, re.M), text
    assert "Cannot set tty process group" not in text


async def test_cp_both_ways(web: DevCluster, kubectl: Any, tmp_path: Path) -> None:
    source = tmp_path / "in.bin"
    source.write_bytes(os.urandom(300_000))
    up = await kubectl("cp", str(source), "web:/tmp/work/copied.bin")
    assert up.returncode == 0, up.stderr
    size = await kubectl("exec", "web", "--", "stat", "-c", "%s", "/tmp/work/copied.bin")
    assert size.stdout.strip() == "300000"
    back = tmp_path / "out.bin"
    down = await kubectl("cp", "web:/tmp/work/copied.bin", str(back))
    assert down.returncode == 0, down.stderr
    assert back.read_bytes() == source.read_bytes()


async def _forward(kubeconfig_path: Path, target: str, remote: int) -> tuple[Any, int]:
    proc = await asyncio.create_subprocess_exec(
        kubectl_binary(),
        f"--kubeconfig={kubeconfig_path}",
        "port-forward",
        target,
        f":{remote}",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = (await proc.stdout.readline()).decode()
    match = re.search(r"Forwarding from 127\.0\.0\.1:(\d+)", line)
    assert match, line + (await proc.stderr.read()).decode() if proc.stderr else line
    return proc, int(match.group(1))


def _get(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
        return str(response.read().decode())


async def test_port_forward_to_a_pod_and_to_a_service(
    web: DevCluster, kubeconfig_path: Path
) -> None:
    for target, remote in (("pod/web", 8080), ("svc/web", 80)):
        proc, port = await _forward(kubeconfig_path, target, remote)
        try:
            for _ in range(3):  # several connections through one session
                assert await asyncio.to_thread(_get, port) == "hello from web"
            # A port nothing listens on: that connection fails, the session stays.
        finally:
            proc.terminate()
            await proc.wait()
    proc, port = await _forward(kubeconfig_path, "pod/web", 9999)
    try:
        with pytest.raises(OSError):
            await asyncio.to_thread(_get, port)
        assert proc.returncode is None
    finally:
        proc.terminate()
        _, err = await proc.communicate()
    assert "error forwarding port 9999" in err.decode()


async def test_logs_follow_ends_cleanly_when_the_pod_goes(
    dev_cluster: DevCluster, eventually: Any, kubeconfig_path: Path
) -> None:
    code = "import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.2)\n"
    await dev_cluster.client.create(
        PODS, python_pod("ticker", code, terminationGracePeriodSeconds=1)
    )
    await running(dev_cluster, eventually, "ticker")
    proc = await asyncio.create_subprocess_exec(
        kubectl_binary(),
        f"--kubeconfig={kubeconfig_path}",
        "logs",
        "-f",
        "ticker",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert (await proc.stdout.readline()) == b"tick\n"
    await dev_cluster.client.delete(f"{PODS}/ticker")
    out, err = await proc.communicate()
    assert proc.returncode == 0, err
    assert err == b""
    assert out.endswith(b"tick\n")


async def test_attach_follows_the_container_output(
    dev_cluster: DevCluster, eventually: Any, kubeconfig_path: Path
) -> None:
    code = "import time\nfor i in range(999):\n    print('beat', i, flush=True)\n"
    code += "    time.sleep(0.5)\n"
    await dev_cluster.client.create(PODS, python_pod("beater", code))
    await running(dev_cluster, eventually, "beater")
    proc = await asyncio.create_subprocess_exec(
        kubectl_binary(),
        f"--kubeconfig={kubeconfig_path}",
        "attach",
        "beater",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        first = await proc.stdout.readline()
        second = await proc.stdout.readline()
        # What the container writes from now on, line after line.
        assert first.startswith(b"beat ") and second.startswith(b"beat "), (first, second)
        assert int(second.split()[1]) == int(first.split()[1]) + 1
    finally:
        proc.terminate()
        await proc.wait()


# Echoes each line it reads with a prefix; says so and exits 0 at end of file.
ECHO = (
    "import sys\n"
    "for line in sys.stdin:\n"
    "    print('got', line.strip(), flush=True)\n"
    "print('stdin closed', flush=True)\n"
)


async def _attach_i(kubeconfig_path: Path, pod: str) -> Any:
    return await asyncio.create_subprocess_exec(
        kubectl_binary(),
        f"--kubeconfig={kubeconfig_path}",
        "attach",
        "-i",
        pod,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def _say(proc: Any, line: str) -> bytes:
    """Write a line to kubectl's stdin; the container's next output line."""
    proc.stdin.write(line.encode() + b"\n")
    await proc.stdin.drain()
    return bytes(await proc.stdout.readline())


async def test_attach_i_writes_the_container_stdin_which_stays_open(
    dev_cluster: DevCluster, eventually: Any, kubeconfig_path: Path, kubectl: Any
) -> None:
    """`stdin: true` without stdinOnce: every attach session may write, and the container's
    stdin outlives each of them."""
    await dev_cluster.client.create(PODS, python_pod("echo", ECHO, container={"stdin": True}))
    await running(dev_cluster, eventually, "echo")
    for word in ("first", "second"):
        proc = await _attach_i(kubeconfig_path, "echo")
        try:
            assert await _say(proc, word) == f"got {word}\n".encode()
        finally:
            proc.terminate()
            await proc.wait()
    # Both sessions are gone, the container still runs and reads on.
    assert (await status_of(dev_cluster, "echo"))["containerStatuses"][0]["state"].get("running")
    logs = await kubectl("logs", "echo")
    assert logs.stdout == "got first\ngot second\n"


async def test_attach_i_with_stdin_once_closes_the_container_stdin_at_the_end(
    dev_cluster: DevCluster, eventually: Any, kubeconfig_path: Path
) -> None:
    """`stdinOnce`: when the first session closes its stdin, the container reads end of file
    (here it then exits 0, and the attach ends with what it wrote last)."""
    pod = python_pod(
        "once", ECHO, restartPolicy="Never", container={"stdin": True, "stdinOnce": True}
    )
    await dev_cluster.client.create(PODS, pod)
    await running(dev_cluster, eventually, "once")
    proc = await _attach_i(kubeconfig_path, "once")
    assert await _say(proc, "hello") == b"got hello\n"
    proc.stdin.close()
    out, err = await proc.communicate()
    assert proc.returncode == 0, err
    assert out == b"stdin closed\n"

    async def succeeded() -> None:
        assert (await status_of(dev_cluster, "once")).get("phase") == "Succeeded"

    await eventually(succeeded, within=30)


async def test_a_restarted_stdin_once_container_reads_a_fresh_stdin(
    dev_cluster: DevCluster, eventually: Any, kubeconfig_path: Path
) -> None:
    pod = python_pod("again", ECHO, container={"stdin": True, "stdinOnce": True})
    await dev_cluster.client.create(PODS, pod)
    await running(dev_cluster, eventually, "again")
    first = await _attach_i(kubeconfig_path, "again")
    assert await _say(first, "one") == b"got one\n"
    first.stdin.close()
    await first.communicate()

    async def restarted() -> None:
        (status,) = (await status_of(dev_cluster, "again"))["containerStatuses"]
        assert status["restartCount"] == 1 and status["state"].get("running"), status

    await eventually(restarted, within=30)
    second = await _attach_i(kubeconfig_path, "again")
    try:
        assert await _say(second, "two") == b"got two\n"
    finally:
        second.terminate()
        await second.wait()


async def test_kubectl_run_i_pipes_into_the_new_pod(dev_cluster: DevCluster, kubectl: Any) -> None:
    """`kubectl run -i --rm` makes a pod with stdin and stdinOnce, attaches, pipes its input
    in, and deletes the pod once the command has ended."""
    done = await kubectl(
        "run",
        "reader",
        "-i",
        "--rm",
        "--restart=Never",
        "--image=busybox",
        "--command",
        "--",
        "sh",
        "-c",
        "tr a-z A-Z",
        input="shout this\n",
    )
    assert done.returncode == 0, done.stderr
    assert "SHOUT THIS" in done.stdout, done.stdout + done.stderr
    assert 'pod "reader" deleted' in done.stdout + done.stderr


async def test_attach_i_is_refused_without_stdin_in_the_spec(
    dev_cluster: DevCluster, eventually: Any, kubectl: Any
) -> None:
    # Its stdin is /dev/null: it would read end of file at once, so it only sleeps.
    await dev_cluster.client.create(PODS, python_pod("plain", "import time; time.sleep(999)"))
    await running(dev_cluster, eventually, "plain")
    done = await kubectl("attach", "-i", "plain", input="x\n")
    assert done.returncode != 0
    assert "does not set `stdin: true`" in done.stderr, done.stderr


async def test_the_older_v4_channel_protocol(web: DevCluster) -> None:
    """Clients that offer only v4.channel.k8s.io (no stdin-close signal) get it; the exit
    status arrives on the error channel as a Status with an ExitCode cause."""
    import json
    import ssl

    import aiohttp

    context = ssl.create_default_context(cadata=web.ca_pem.decode())
    query = "command=sh&command=-c&command=echo+hi%3B+exit+4&stdout=true&stderr=true"
    url = f"{web.url}/api/v1/namespaces/default/pods/web/exec?{query}"
    headers = {"Authorization": f"Bearer {web.token}"}
    channels: dict[int, bytes] = {}
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            url, protocols=["v4.channel.k8s.io"], headers=headers, ssl=context
        ) as ws,
    ):
        assert ws.protocol == "v4.channel.k8s.io"
        async for message in ws:
            if message.type == aiohttp.WSMsgType.BINARY:
                channels[message.data[0]] = channels.get(message.data[0], b"") + message.data[1:]
    assert channels[1] == b"hi\n"
    status = json.loads(channels[3])
    assert status["status"] == "Failure" and status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "4"}]
