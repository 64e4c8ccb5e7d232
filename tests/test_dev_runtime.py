"""`raycluster-operator dev --runtime auto`: real processes where the machine allows, else
simulated pods with the reason said; and the RAY column of the live table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from devkube.process import sandbox
from raycluster_operator.cli import main
from raycluster_operator.devcluster.foreground import resolve_runtime
from raycluster_operator.devcluster.live_view import ray_state
from raycluster_operator.devcluster.pod_table import pod_table

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "tpu-v5p-2x2x2-local.yaml"


def _availability(monkeypatch: pytest.MonkeyPatch, ok: bool, why: str) -> None:
    monkeypatch.setattr(sandbox, "process_runtime_available", lambda: (ok, why))
    import devkube.process as process

    monkeypatch.setattr(process, "process_runtime_available", lambda: (ok, why))


def test_auto_takes_the_process_runtime_where_the_machine_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _availability(monkeypatch, True, "fine")
    assert resolve_runtime("auto")[0] == "process"


def test_auto_falls_back_to_simulated_pods_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    _availability(monkeypatch, False, "the process runtime needs root")
    runtime, why = resolve_runtime("auto")
    assert runtime == "simulated"
    assert "needs root" in why


@pytest.mark.parametrize("asked", ["simulated", "process"])
def test_an_explicit_runtime_is_kept(monkeypatch: pytest.MonkeyPatch, asked: str) -> None:
    _availability(monkeypatch, False, "no")
    assert resolve_runtime(asked)[0] == asked


def test_unknown_runtime_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["dev", "--runtime", "docker"])
    assert result.exit_code == 2
    assert "auto, simulated, process" in result.output


def test_ray_state_reads_the_ray_start_banner() -> None:
    assert ray_state(None, "Running") == ""
    assert ray_state(b"Local node IP: 127.1.0.2\n", "Running") == "starting"
    assert ray_state(b"...\nRay runtime started.\n", "Running") == "up"
    assert ray_state(b"Ray runtime started.\n", "Failed") == ""


def test_pod_table_has_a_ray_column_only_when_asked() -> None:
    pod: dict[str, Any] = {
        "metadata": {"namespace": "default", "name": "w", "labels": {"ray.io/group": "tpu"}},
        "spec": {"nodeName": "n", "containers": [{}]},
        "status": {"phase": "Running", "containerStatuses": [{"ready": True}]},
    }
    assert "RAY" not in pod_table([pod]).splitlines()[0].split()
    lines = pod_table([pod], lambda p, phase: f"{p['metadata']['name']}:{phase}").splitlines()
    assert lines[0].split()[-1] == "RAY"
    assert lines[1].split()[-1] == "w:Running"


def test_the_local_example_plans_one_two_host_slice() -> None:
    result = CliRunner().invoke(main, ["plan", "-f", str(EXAMPLE), "--now", "2026-11-29T19:00:00Z"])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines() if line.startswith("create")]
    hosts = sorted((r[3], r[4]) for r in rows if r[1] == "tpu-v5p")
    assert hosts == [("0", "0"), ("0", "1")]
