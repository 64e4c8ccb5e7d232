"""One pod's private world: a mount, PID and UTS namespace made with `unshare`.

A pod's processes must all die with the pod, even the daemons a program leaves behind (Ray's
helpers outlive a killed `ray start`). Every container therefore runs inside one PID namespace
per pod whose init is `podinit.py`: killing that init kills everything in the pod. The same
mount namespace carries the pod's /etc/hosts, /etc/hostname, service-account directory and a
private /tmp, bind-mounted from files the runtime keeps rewriting from the outside.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from devkube.process.security import RunAs

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_NOFILE = 1048576
_PODINIT = Path(__file__).with_name("podinit.py")
_TOOLS = ("unshare", "nsenter", "mount", "setsid", "hostname")


@functools.cache
def process_runtime_available() -> tuple[bool, str]:
    """Whether this machine can run pods as processes, and why not when it cannot."""
    if not sys.platform.startswith("linux"):
        return False, f"the process runtime needs Linux namespaces, this is {sys.platform}"
    if os.geteuid() != 0:
        return False, "the process runtime needs root (unshare --mount --pid, bind mounts)"
    missing = [tool for tool in _TOOLS if shutil.which(tool) is None]
    if missing:
        return False, f"the process runtime needs util-linux tools, missing: {', '.join(missing)}"
    probe = subprocess.run(
        ["unshare", "--mount", "--pid", "--uts", "--fork", "--mount-proc", "true"],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    if probe.returncode != 0:
        return False, f"unshare failed here: {probe.stderr.strip() or probe.returncode}"
    return True, "unshare and root are available"


class _Under:
    """A well-known entry under ``SandboxFiles.root``, named once where the class lists it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, files: SandboxFiles, owner: type[SandboxFiles]) -> Path:
        return files.root / self.name


@dataclass(frozen=True)
class SandboxFiles:
    """The host-side files a pod's namespace shows at well-known paths."""

    root: Path

    hosts = _Under("hosts")
    hostname = _Under("hostname")
    service_account = _Under("serviceaccount")
    tmp = _Under("tmp")
    logs = _Under("logs")


def write_in_place(path: Path, content: str | bytes) -> bool:
    """Rewrite a bind-mounted file without replacing its inode; False when unchanged.

    A rename would leave the pod's bind mount pointing at the old file.
    """
    data = content.encode() if isinstance(content, str) else content
    with contextlib.suppress(FileNotFoundError):
        if path.read_bytes() == data:
            return False
    with open(path, "r+b" if path.exists() else "wb") as fh:
        fh.write(data)
        fh.truncate()
    return True


def _host_dirs_under_tmp() -> list[Path]:
    """Top-level /tmp entries that hold what pods run with (this Python, its virtualenv, the
    working directory): a checkout under /tmp must stay visible through the pod's private
    /tmp, or no container command could start."""
    tmp = Path("/tmp")
    found: set[Path] = set()
    for raw in (sys.prefix, sys.base_prefix, os.path.dirname(sys.executable), os.getcwd()):
        path = Path(raw).resolve()
        if path != tmp and tmp in path.parents:
            found.add(tmp / path.relative_to(tmp).parts[0])
    return sorted(found)


def device_mountpoints(device_nodes: Sequence[str]) -> list[Path]:
    """The directories that hold the device nodes. Each is made on the host when missing (an
    empty directory, as on a real GPU host where the driver made it) and covered by a tmpfs
    inside the pod: the nodes exist in the pod's mount namespace only."""
    return sorted({Path(n).parent for n in device_nodes if Path(n).parent != Path("/dev")})


def _device_lines(device_nodes: Sequence[str]) -> list[str]:
    # A regular empty file stands for each character device: there is no GPU to open.
    lines = []
    for directory in device_mountpoints(device_nodes):
        lines.append(f"mount -t tmpfs -o mode=0755 devk-dra {shlex.quote(str(directory))}")
    for node in device_nodes:
        lines.append(f": > {shlex.quote(node)}")
        lines.append(f"chmod 0666 {shlex.quote(node)}")
    return lines


def _setup_script(files: SandboxFiles, hostname: str, device_nodes: Sequence[str] = ()) -> str:
    # Runs as PID 1 of the new namespaces before exec'ing podinit, which stays PID 1. Mounts
    # made here stay in the pod's private mount namespace.
    binds = [
        (files.hosts, "/etc/hosts"),
        (files.hostname, "/etc/hostname"),
        (files.service_account, SERVICE_ACCOUNT_DIR),
    ]
    lines = ["set -e", f"hostname {shlex.quote(hostname)}"]
    lines.append(f"mkdir -p {shlex.quote(SERVICE_ACCOUNT_DIR)}")
    lines += [f"mount --bind {shlex.quote(str(src))} {shlex.quote(dst)}" for src, dst in binds]
    for host_dir in _host_dirs_under_tmp():
        inside = shlex.quote(str(files.tmp / host_dir.name))
        lines.append(f"mkdir -p {inside}")
        lines.append(f"mount --bind {shlex.quote(str(host_dir))} {inside}")
    # Recursive, so the host directories bound into the private /tmp come along.
    lines.append(f"mount --rbind {shlex.quote(str(files.tmp))} /tmp")
    lines += _device_lines(device_nodes)
    lines.append('exec "$@"')
    return "\n".join(lines)


@functools.cache
def _init_argv() -> list[str]:
    # The script's text, not its path: the pod's private /tmp may hide the path (a checkout or
    # virtualenv under /tmp), and PID 1 must start whatever the host's layout.
    return [sys.executable, "-I", "-c", _PODINIT.read_text()]


def _pids_in_namespace(ns_inode: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{entry}/ns/pid").st_ino == ns_inode:
                pids.append(int(entry))
    return pids


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


class PodSandbox:
    """The namespaces of one pod and the processes started in them."""

    def __init__(
        self,
        files: SandboxFiles,
        hostname: str,
        netns: str | None = None,
        *,
        device_nodes: Sequence[str] = (),
    ) -> None:
        self.files = files
        # DRA device node paths shown in the pod's mount namespace (`_device_lines`).
        self.device_nodes = tuple(device_nodes)
        self.hostname = hostname
        # A named network namespace (process/network.py) the pod lives in; None: the host's.
        self.netns = netns
        self._unshare: asyncio.subprocess.Process | None = None
        self._lifeline = -1
        self.init_pid = 0
        self._ns_inode = 0

    @property
    def running(self) -> bool:
        return self._unshare is not None and self._unshare.returncode is None

    def prepare(self) -> None:
        """Create the host-side files (empty until the runtime fills them)."""
        for directory in device_mountpoints(self.device_nodes):
            directory.mkdir(parents=True, exist_ok=True)
        for d in (self.files.root, self.files.service_account, self.files.logs):
            d.mkdir(parents=True, exist_ok=True)
        self.files.tmp.mkdir(parents=True, exist_ok=True)
        self.files.tmp.chmod(0o1777)
        for f in (self.files.hosts, self.files.hostname):
            if not f.exists():
                f.write_text("")
        write_in_place(self.files.hostname, self.hostname + "\n")

    async def start(self) -> None:
        """Create the namespaces; returns once PID 1 of the pod is up."""
        self.prepare()
        # The pod's PID 1 exits when this pipe's write end closes: the pod dies with us.
        lifeline_read, self._lifeline = os.pipe()
        enter_net = ["nsenter", f"--net=/run/netns/{self.netns}", "--"] if self.netns else []
        self._unshare = await asyncio.create_subprocess_exec(
            *enter_net,
            "unshare",
            "--mount",
            "--pid",
            "--uts",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "sh",
            "-c",
            _setup_script(self.files, self.hostname, self.device_nodes),
            "podinit",
            *_init_argv(),
            str(lifeline_read),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            pass_fds=(lifeline_read,),
        )
        os.close(lifeline_read)
        # PID 1 is ready once it has exec'd podinit (the mounts are done by then).
        for _ in range(400):
            if self._unshare.returncode is not None:
                break
            kids = _children(self._unshare.pid)
            if kids and _argv(kids[0])[:4] == _init_argv():
                self.init_pid = kids[0]
                self._ns_inode = os.stat(f"/proc/{self.init_pid}/ns/pid").st_ino
                return
            await asyncio.sleep(0.01)
        err = b""
        if self._unshare.returncode is not None and self._unshare.stderr is not None:
            err = await self._unshare.stderr.read()
        await self.kill()
        raise RuntimeError(f"pod sandbox did not start: {err.decode(errors='replace').strip()}")

    def _enter(self, workdir: str, user: RunAs | None = None) -> list[str]:
        # nsenter's child joins the PID namespace; `sh` makes the working directory and hands
        # over to `setsid`, so each container is a session the runtime can signal as a whole;
        # `setpriv` then becomes the container's user (the working directory is made its own).
        # Only a directory made here is given to the user: never one that already exists.
        own = f' && chown {user.uid}:{user.gid} -- "$0"' if user else ""
        drop = " ".join(user.setpriv()) + " " if user else ""
        script = f'{{ [ -d "$0" ] || {{ mkdir -p -- "$0"{own}; }}; }} && cd -- "$0" && '
        script += f'exec setsid {drop}"$@"'
        return self._nsenter("sh", "-c", script, workdir or "/")

    def exec_argv(self, workdir: str, *, tty: bool = False, user: RunAs | None = None) -> list[str]:
        """The prefix that runs a command in the pod for `kubectl exec`, as the container's
        user. With a terminal the command leads a session inside the pod whose controlling
        terminal is its stdin, so a shell's job control finds every process group it deals
        with in its own namespace."""
        session = ["setsid", "--ctty"] if tty else []
        drop = user.setpriv() if user else []
        script = 'cd -- "$0" && exec "$@"'
        return self._nsenter(*session, *drop, "sh", "-c", script, workdir or "/")

    def _nsenter(self, *command: str) -> list[str]:
        """`command` inside every namespace of the pod (its init process as the target)."""
        return ["nsenter", f"--target={self.init_pid}", *self._namespaces(), "--", *command]

    def _namespaces(self) -> list[str]:
        return ["--mount", "--pid", "--uts", *(["--net"] if self.netns else [])]

    async def spawn(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        workdir: str,
        log_path: Path,
        *,
        stdin: bool = False,
        user: RunAs | None = None,
    ) -> ContainerProcess:
        """Start one container's main process, its output appended to `log_path`; with
        `stdin`, its stdin is a pipe the runtime keeps open (the container spec's `stdin:
        true`, which `kubectl attach -i` writes to), else /dev/null as under a kubelet."""
        if not self.running:
            raise RuntimeError("pod sandbox is not running")
        with _append(log_path) as log:
            proc = await asyncio.create_subprocess_exec(
                *self._enter(workdir, user),
                *argv,
                env=dict(env),
                stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=container_limits,
            )
        container = ContainerProcess(proc)
        await container.settle()
        return container

    async def exec(
        self, argv: Sequence[str], env: Mapping[str, str], workdir: str, seconds: float
    ) -> tuple[int, bytes]:
        """Run a command in the pod (an exec probe); exit code -1 on timeout."""
        proc = await asyncio.create_subprocess_exec(
            *self._enter(workdir),
            *argv,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=container_limits,
        )
        container = ContainerProcess(proc)
        try:
            async with asyncio.timeout(seconds):
                out, _ = await proc.communicate()
        except TimeoutError:
            container.signal(signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            return -1, b""
        container.signal(signal.SIGKILL)
        return int(proc.returncode or 0), out

    def pids(self) -> list[int]:
        """Host PIDs of every process in the pod except its init."""
        if not self._ns_inode:
            return []
        return [p for p in _pids_in_namespace(self._ns_inode) if p != self.init_pid]

    def signal_all(self, sig: int) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    async def kill(self) -> None:
        """Tear the pod down: the init dies, and the kernel kills the rest of the namespace."""
        if self._lifeline >= 0:
            os.close(self._lifeline)
            self._lifeline = -1
        if self.init_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, signal.SIGKILL)
        if self._unshare is not None:
            if self._unshare.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self._unshare.kill()
            await self._unshare.wait()
        # The namespace is gone once its last process is reaped; wait for that.
        for _ in range(200):
            if not self.pids():
                break
            await asyncio.sleep(0.01)


def container_limits() -> None:
    # What container runtimes give a container: a high open-files limit, so the usual
    # `ulimit -n 65536` in entrypoints works. Raising the hard limit needs CAP_SYS_RESOURCE;
    # without it the soft limit at least goes up to the hard one.
    try:
        ceiling = min(_NOFILE, int(Path("/proc/sys/fs/nr_open").read_text()))
    except (OSError, ValueError):
        ceiling = _NOFILE
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for limit in (max(ceiling, hard), hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
            return
        except (ValueError, OSError):
            continue


def _append(path: Path) -> BinaryIO:
    return open(path, "ab")  # the caller closes it


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


class ContainerProcess:
    """A container's main process: `nsenter` outside, the program inside as a session leader."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._inner = 0

    async def settle(self) -> None:
        """Wait (briefly) until the program inside leads its own session, so the container can
        be signalled as a whole from now on."""
        for _ in range(400):
            if self.proc.returncode is not None:
                return
            inner = self.inner_pid()
            with contextlib.suppress(ProcessLookupError):
                if inner and os.getsid(inner) == inner:
                    return
            await asyncio.sleep(0.005)

    def inner_pid(self) -> int:
        """Host PID of the program (the session it leads is the container's process group)."""
        if not self._inner:
            kids = _children(self.proc.pid)
            self._inner = kids[0] if kids else 0
        return self._inner

    def signal(self, sig: int) -> None:
        """Signal every process of the container's session."""
        inner = self.inner_pid()
        if not inner:
            return
        try:
            os.killpg(inner, sig)
        except ProcessLookupError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(inner, sig)

    async def wait(self) -> int:
        """Exit code as a kubelet reports it: 128+signal when killed by a signal."""
        code = await self.proc.wait()
        # Processes the main one left behind in its session go with it, as in a container.
        self.signal(signal.SIGKILL)
        return 128 - code if code < 0 else code
