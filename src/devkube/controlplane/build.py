"""Real Kubernetes binaries, built once from the Go module proxy into a cache outside the tree.

Each folder of `gomod/` is a Go module that only pins a release (docs/design.md §8.2): its
`tool` lines name the commands to build, its `go.sum` fixes every dependency. The cache key is
a digest of both files and the Go version, so a changed pin builds anew and a machine that has
built once reuses the binaries. Nothing is fetched but modules, and nothing is committed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

GOMOD = Path(__file__).resolve().parent / "gomod"
#: The control plane's modules, in build order.
CONTROL_PLANE = ("etcd", "kubernetes")


def modules() -> list[str]:
    """Every pinned module (`make kube` builds them all): the control plane first, then the
    peers (Helm, KubeRay's operator, Kueue) the tier's tests run beside it."""
    found = sorted(p.name for p in GOMOD.iterdir() if (p / "go.mod").is_file())
    return [*CONTROL_PLANE, *(m for m in found if m not in CONTROL_PLANE)]


class BuildError(RuntimeError):
    """A module could not be built: no Go toolchain, or `go build` failed (its output says
    why)."""


def cache_root() -> Path:
    """`$RCO_CACHE_DIR`, else `$XDG_CACHE_HOME/raycluster-operator`, else ~/.cache/...: kept
    between runs and clones, never inside the work tree."""
    explicit = os.environ.get("RCO_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "raycluster-operator"


def tools_of(module: str) -> list[str]:
    """The package paths of a module's `tool` lines (one line, or a `tool ( ... )` block)."""
    tools: list[str] = []
    block = False
    for raw in (GOMOD / module / "go.mod").read_text().splitlines():
        line = raw.split("//", 1)[0].strip()
        if block:
            if line == ")":
                block = False
            elif line:
                tools.append(line)
        elif line == "tool (":
            block = True
        elif line.startswith("tool "):
            tools.append(line.split(None, 1)[1])
    return tools


def ldflags_of(module: str) -> str:
    """`-s -w` plus the module's `// build-ldflags: ...` line in its go.mod, where `{path}`
    stands for the version go.mod pins for that module path: Kubernetes stamps its release
    into the binaries this way (hack/lib/version.sh), and `kubectl version` reads it."""
    flags = ["-s", "-w"]
    for raw in (GOMOD / module / "go.mod").read_text().splitlines():
        line = raw.strip()
        if line.startswith("// build-ldflags:"):
            text = line.split(":", 1)[1].strip()
            for path in re.findall(r"\{([^}]+)\}", text):
                text = text.replace("{" + path + "}", version_of(module, path))
            flags.extend(text.split())
    return " ".join(flags)


def binary_name(package: str) -> str:
    """What `go build` names a package's binary: its last element, less a `/vN` suffix."""
    parts = package.rstrip("/").split("/")
    last = parts[-1]
    if len(parts) > 1 and last.startswith("v") and last[1:].isdigit():
        last = parts[-2]
    return last


def go_binary() -> str:
    found = shutil.which("go")
    if found is None:
        raise BuildError(
            "no Go toolchain on PATH: the real-Kubernetes tier builds kube-apiserver, "
            "kube-controller-manager, kube-scheduler and etcd from the Go module proxy "
            "(install Go >= 1.26, then run `make kube`)"
        )
    return found


def go_version() -> str:
    return subprocess.run(
        [go_binary(), "env", "GOVERSION"], capture_output=True, text=True, check=True
    ).stdout.strip()


def version_of(module: str, path: str) -> str:
    """The version a module's go.mod pins for `path` (its `require` or `replace` line)."""
    for raw in (GOMOD / module / "go.mod").read_text().splitlines():
        words = raw.split("//", 1)[0].split()
        if path in words:
            at = words.index(path)
            if at + 1 < len(words) and words[at + 1].startswith("v"):
                return words[at + 1]
    raise LookupError(f"{module}/go.mod pins no version of {path}")


def source_dir(module: str, path: str) -> Path:
    """Where the Go module cache holds the source of `path` at the version `module` pins
    (downloaded now if absent): an add-on reads the manifests a release ships (CRDs, RBAC,
    webhooks) from there, so none is copied into this tree."""
    folder = GOMOD / module
    env = {**os.environ, "GOFLAGS": "-mod=readonly"}
    command = [go_binary(), "mod", "download", "-json", f"{path}@{version_of(module, path)}"]
    result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"`{' '.join(command)}` in {folder} failed:\n{result.stderr[-4000:]}")
    return Path(json.loads(result.stdout)["Dir"])


@dataclass(frozen=True)
class Built:
    """A module's binaries in the cache, by name (`kube-apiserver`, `server` for etcd...)."""

    module: str
    directory: Path
    seconds: float  # 0 when the cache already held them

    def path(self, name: str) -> Path:
        return self.directory / name


def cache_dir(module: str) -> Path:
    folder = GOMOD / module
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((folder / name).read_bytes())
    digest.update(go_version().encode())
    return cache_root() / "bin" / f"{module}-{digest.hexdigest()[:16]}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One build at a time per cache entry (pytest-xdist workers all ask at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _say(message: str) -> None:
    print(f"[kube build] {message}", file=sys.stderr, flush=True)


def ensure_built(module: str, *, say: Callable[[str], None] = _say) -> Built:
    """The module's binaries, built now if the cache lacks them; progress goes to `say`."""
    target = cache_dir(module)
    done = target / ".complete"
    if done.exists():
        return Built(module, target, 0.0)
    with _locked(target.with_suffix(".lock")):
        if done.exists():
            return Built(module, target, 0.0)
        return _build(module, target, say)


def _build(module: str, target: Path, say: Callable[[str], None]) -> Built:
    started = time.monotonic()
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    folder = GOMOD / module
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false"}
    say(f"{module}: downloading modules pinned by {folder / 'go.sum'}")
    _run([go_binary(), "mod", "download"], folder, env)
    for package in tools_of(module):
        step = time.monotonic()
        say(f"{module}: building {package} ...")
        _run(
            [
                go_binary(),
                "build",
                "-trimpath",
                f"-ldflags={ldflags_of(module)}",
                "-o",
                str(staging),
                package,
            ],
            folder,
            env,
        )
        say(f"{module}: {binary_name(package)} built in {time.monotonic() - step:.0f} s")
    (staging / ".complete").write_text(f"{time.monotonic() - started:.1f}\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    seconds = time.monotonic() - started
    say(f"{module}: done in {seconds:.0f} s, cached in {target}")
    return Built(module, target, seconds)


def _run(command: list[str], folder: Path, env: dict[str, str]) -> None:
    result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"`{' '.join(command)}` in {folder} failed:\n{result.stderr[-4000:]}")
