"""`raycluster-operator dev --control-plane kubernetes --with kueue` as a user runs it, with
the README's example (examples/kueue/tpu-slices.yaml: queues whose TPU quota is one v5p
slice, and a RayCluster on them): Kueue admits the RayCluster, `kubectl get workloads` shows
it, and its slice runs. `--with kueue` on the embedded control plane is a usage error."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from raycluster_operator.cli import main
from tests.devcluster.test_dev_cli import KUBECTL, start_dev, stop_dev
from tests.harness.kueue import require_kueue

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kueue" / "tpu-slices.yaml"


def test_with_kueue_needs_the_kubernetes_control_plane() -> None:
    result = CliRunner().invoke(main, ["dev", "--with", "kueue"])
    assert result.exit_code == 2
    assert "add --control-plane kubernetes" in result.output


@pytest.mark.kubernetes
def test_dev_with_kueue_admits_the_example_slice(tmp_path: Path) -> None:
    require_kueue()
    kubeconfig = tmp_path / "kubeconfig"
    process = start_dev(
        kubeconfig,
        *("--control-plane", "kubernetes", "--with", "kueue", "--runtime", "simulated"),
        *("--nodes", "tpu:v5p:2x2x2:1", "--nodes", "cpu:2", "--apply", str(EXAMPLE)),
    )
    try:
        deadline = time.monotonic() + 240  # a hang guard: the first start may build Kueue
        while not kubeconfig.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the kubeconfig never appeared"
            time.sleep(0.2)

        def get(*args: str) -> str:
            done = subprocess.run(
                [KUBECTL, f"--kubeconfig={kubeconfig}", "get", *args],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        deadline = time.monotonic() + 90
        while True:
            workloads = json.loads(get("workloads", "-o", "json"))["items"]
            admitted = [
                w
                for w in workloads
                if any(
                    c["type"] == "Admitted" and c["status"] == "True"
                    for c in (w.get("status") or {}).get("conditions", [])
                )
            ]
            cluster = json.loads(get("raycluster", "queued-a", "-o", "json"))
            if admitted and (cluster.get("status") or {}).get("readyWorkerSlices") == 1:
                break
            assert time.monotonic() < deadline, (workloads, cluster.get("status"))
            time.sleep(0.5)
        assert [w["metadata"]["ownerReferences"][0]["name"] for w in admitted] == ["queued-a"]
        assert "raycluster-queued-a-" in get("workloads")
    finally:
        err = stop_dev(process)
    assert process.returncode == 0, err
    assert "kueue up in" in err
