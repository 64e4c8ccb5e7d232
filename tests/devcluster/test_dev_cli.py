"""`raycluster-operator dev` as a user runs it: a subprocess, a kubeconfig, kubectl, SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from raycluster_operator.cli import main
from raycluster_operator.devcluster.pod_table import pod_table

KUBECTL = str(Path(sys.executable).parent / "kubectl")


def wait_for_file(path: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 180  # a hang guard, not a performance limit (54 s at load 20)
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the kubeconfig never appeared"
        time.sleep(0.05)


def start_dev(kubeconfig: Path, *args: str) -> subprocess.Popen[str]:
    """`raycluster-operator dev` on a free port, writing `kubeconfig`, as a user starts it."""
    command = [sys.executable, "-m", "raycluster_operator", "dev", "--port", "0"]
    return subprocess.Popen(
        [*command, "--kubeconfig", str(kubeconfig), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def stop_dev(process: subprocess.Popen[str]) -> str:
    """SIGTERM, as Ctrl-C or a service manager stops it; its stderr."""
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    return err


def test_dev_writes_a_kubeconfig_kubectl_can_use_and_stops_cleanly(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "cfg" / "kubeconfig"
    manifest = tmp_path / "objects.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: first}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: worker, labels: {ray.io/group: g}}\n"
        "spec: {containers: [{name: ray, image: ray}]}\n"
    )
    process = start_dev(kubeconfig, "--nodes", "tpu:v5p:2x2x4,cpu:1", "--apply", str(manifest))
    try:
        wait_for_file(kubeconfig, process)
        nodes = subprocess.run(
            [KUBECTL, f"--kubeconfig={kubeconfig}", "get", "nodes", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert nodes.returncode == 0, nodes.stderr
        assert sorted(nodes.stdout.split()) == [
            "node/cpu-0-n0",
            *(f"node/tpu-v5p-2x2x4-0-h{h}" for h in range(4)),
        ]
        # The --apply files were in before the kubeconfig appeared.
        applied = subprocess.run(
            [KUBECTL, f"--kubeconfig={kubeconfig}", "get", "configmap,pod", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert applied.returncode == 0, applied.stderr
        assert {"configmap/first", "pod/worker"} <= set(applied.stdout.split())
    finally:
        err = stop_dev(process)
    assert process.returncode == 0, err
    assert f"export KUBECONFIG={kubeconfig.resolve()}" in err
    assert not kubeconfig.exists()


@pytest.mark.parametrize("watch", [False, True], ids=["plain", "watch"])
def test_ctrl_c_ends_every_task_cleanly(tmp_path: Path, watch: bool) -> None:
    """Ctrl-C (SIGINT) stops `dev` with exit 0 and without asyncio's complaints: a
    coroutine made and never awaited, a task destroyed while pending, a traceback."""
    kubeconfig = tmp_path / "kubeconfig"
    process = start_dev(kubeconfig, "--nodes", "cpu:1", *(["--watch"] if watch else []))
    try:
        wait_for_file(kubeconfig, process)
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    for complaint in ("never awaited", "Task was destroyed", "Traceback", "Exception ignored"):
        assert complaint not in err, err


def test_tpu_pools_by_gke_machine_type_with_kubectl(tmp_path: Path) -> None:
    """v6e 2x4 as GKE offers it: two 4-chip hosts (ct6e-standard-4t) or one 8-chip host."""
    kubeconfig = tmp_path / "kubeconfig"
    process = start_dev(
        kubeconfig,
        "--no-operator",
        "--nodes",
        "tpu:ct6e-standard-4t:2x4",
        "--nodes",
        "tpu:v6e:2x4,tpu:ct5lp-hightpu-4t:4x4",
    )
    try:
        wait_for_file(kubeconfig, process)
        columns = [
            "cloud.google.com/gke-nodepool",
            "cloud.google.com/gke-tpu-accelerator",
            "cloud.google.com/gke-tpu-topology",
            "node.kubernetes.io/instance-type",
        ]
        listing = subprocess.run(
            [
                KUBECTL,
                f"--kubeconfig={kubeconfig}",
                "get",
                "nodes",
                "--no-headers",
                "-o",
                "custom-columns=NAME:.metadata.name,TPU:.status.capacity.google\\.com/tpu",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listing.returncode == 0, listing.stderr
        chips = dict(line.split() for line in listing.stdout.splitlines())
        assert chips == {
            "tpu-v6e-2x4-4t-0-h0": "4",
            "tpu-v6e-2x4-4t-0-h1": "4",
            "tpu-v6e-2x4-0-h0": "8",
            **{f"tpu-v5e-4x4-0-h{h}": "4" for h in range(4)},
        }
        labelled = subprocess.run(
            [KUBECTL, f"--kubeconfig={kubeconfig}", "get", "nodes", "-L", ",".join(columns)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert labelled.returncode == 0, labelled.stderr
        rows = {line.split()[0]: line.split()[-4:] for line in labelled.stdout.splitlines()[1:]}
        assert rows["tpu-v6e-2x4-4t-0-h1"] == [
            "tpu-v6e-2x4-4t-0",
            "tpu-v6e-slice",
            "2x4",
            "ct6e-standard-4t",
        ]
        assert rows["tpu-v6e-2x4-0-h0"] == [
            "tpu-v6e-2x4-0",
            "tpu-v6e-slice",
            "2x4",
            "ct6e-standard-8t",
        ]
        assert rows["tpu-v5e-4x4-0-h3"][1:] == ["tpu-v5-lite-podslice", "4x4", "ct5lp-hightpu-4t"]
    finally:
        err = stop_dev(process)
    assert process.returncode == 0, err


def test_bad_node_spec_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["dev", "--nodes", "tpu:v6e:3x3x3"])
    assert result.exit_code == 2
    assert "2-D topology" in result.output


def test_help_documents_the_node_grammar() -> None:
    result = CliRunner().invoke(main, ["dev", "--help"])
    assert result.exit_code == 0
    for piece in (
        "tpu:<gen>:<topology>[:<pools>]",
        "tpu:ct6e-standard-4t:2x4",
        "gpu:<model>:<hosts>[:<domains>]",
        "cpu:<count>",
    ):
        assert piece in result.output


def _pod(name: str, replica: str | None, host: str | None, **extra: Any) -> dict[str, Any]:
    labels = {"ray.io/group": "tpu"}
    if replica is not None:
        labels["ray.io/worker-group-replica-index"] = replica
    if host is not None:
        labels["ray.io/replica-host-index"] = host
    return {
        "metadata": {"namespace": "default", "name": name, "labels": labels, **extra},
        "spec": {"nodeName": "n1", "containers": [{}, {}]},
        "status": {"phase": "Running", "containerStatuses": [{"ready": True}, {"ready": False}]},
    }


def test_pod_table_orders_rows_as_slices_with_numeric_indices() -> None:
    pods = [
        _pod("z", "10", "0"),
        _pod("y", "2", "1"),
        _pod("x", "2", "0"),
        _pod("w", "1", "10"),
        _pod("v", "1", "9"),
        _pod("gone", "1", "0", deletionTimestamp="x"),
    ]
    lines = pod_table(pods).splitlines()
    header = ["NAMESPACE", "GROUP", "REPLICA", "HOST", "POD", "NODE", "PHASE", "READY"]
    assert lines[0].split() == header
    order = [(line.split()[2], line.split()[3], line.split()[4]) for line in lines[1:]]
    assert order == [
        ("1", "0", "gone"),
        ("1", "9", "v"),
        ("1", "10", "w"),
        ("2", "0", "x"),
        ("2", "1", "y"),
        ("10", "0", "z"),
    ]
    assert lines[1].split()[-2:] == ["Terminating", "1/2"]


def test_pod_table_shows_pods_without_slice_labels() -> None:
    head = {"metadata": {"namespace": "default", "name": "head"}, "spec": {}}
    lines = pod_table([head]).splitlines()
    assert lines[1].split() == ["default", "head", "<none>", "Pending", "0/0"]


CRASHING = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: crash}
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - {name: ray-head, image: rayproject/ray:2.60.0,
           resources: {requests: {cpu: 100m, memory: 128Mi}}}
  workerGroupSpecs:
  - groupName: g
    replicas: 1
    numOfHosts: 2
    rayStartParams: {}
    template:
      spec:
        restartPolicy: Never
        containers:
        - {name: ray-worker, image: rayproject/ray:2.60.0, command: ["exit 3"],
           resources: {requests: {cpu: 100m, memory: 128Mi}}}
"""


def test_dev_passes_the_slice_backoff_flags_to_its_operator(tmp_path: Path) -> None:
    """A worker command that exits at once crash-loops its slice; the operator `dev` runs
    waits the configured 5 s (not the default 10 s) before the third slice."""
    kubeconfig = tmp_path / "kubeconfig"
    manifest = tmp_path / "crash.yaml"
    manifest.write_text(CRASHING)
    process = start_dev(
        kubeconfig,
        "--runtime",
        "simulated",
        "--nodes",
        "cpu:3",
        "--slice-backoff-base",
        "5",
        "--slice-backoff-max",
        "5",
        "--apply",
        str(manifest),
    )
    try:
        wait_for_file(kubeconfig, process)
        deadline = time.monotonic() + 180  # a hang guard, not a performance limit (54 s at load 20)
        message = ""
        while "next try at" not in message:
            assert time.monotonic() < deadline, "no SliceBackoff Event"
            time.sleep(0.2)
            message = subprocess.run(
                [
                    KUBECTL,
                    f"--kubeconfig={kubeconfig}",
                    "get",
                    "events",
                    "--field-selector",
                    "reason=SliceBackoff",
                    "-o",
                    "jsonpath={.items[*].message}",
                ],
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
        assert "group g: slice at index 0 broke 2 times in a row" in message
        assert "(in 5s)" in message
    finally:
        err = stop_dev(process)
    assert process.returncode == 0, err


@pytest.mark.kubernetes
def test_dev_on_kubernetes_control_plane_runs_the_example_and_drains_a_host_whole(
    tmp_path: Path,
) -> None:
    """The issue's path (docs/design.md §8.2): `dev --control-plane kubernetes --apply` the
    README's example; kubectl talks to a v1.37 server, the TPU slice comes up Ready with its
    indices and env, and `kubectl drain` of one host (the real eviction API, the real
    disruption controller) moves the slice whole to the other pool, then SIGTERM stops
    every binary."""
    from tests.harness import control_planes

    control_planes.require(control_planes.KUBERNETES)
    kubeconfig = tmp_path / "kubeconfig"
    example = Path(__file__).parents[2] / "examples" / "tpu-v5p-2x2x2-local.yaml"
    process = start_dev(
        kubeconfig,
        *("--control-plane", "kubernetes", "--runtime", "simulated"),
        *("--nodes", "tpu:v5p:2x2x2:2", "--nodes", "cpu:1", "--apply", str(example)),
    )

    def kubectl(*args: str) -> str:
        done = subprocess.run(
            [KUBECTL, f"--kubeconfig={kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    try:
        wait_for_file(kubeconfig, process)
        assert "Server Version: v1.37" in kubectl("version")
        kubectl(
            "wait",
            "raycluster/local-tpu",
            "--for=jsonpath={.status.readyWorkerSlices}=1",
            "--timeout=120s",
        )
        columns = (
            "custom-columns=NODE:.spec.nodeName,"
            "INDEX:.metadata.labels.ray\\.io/worker-group-replica-index,"
            "HOST:.metadata.labels.ray\\.io/replica-host-index,"
            "ID:.spec.containers[0].env[?(@.name=='TPU_WORKER_ID')].value"
        )
        before = kubectl(
            "get", "pods", "-l", "ray.io/node-type=worker", "-o", columns, "--no-headers"
        ).split("\n")
        rows = sorted((line.split() for line in before if line), key=lambda r: (r[1], r[2]))
        assert [(r[1], r[2], r[3]) for r in rows] == [("0", "0", "0"), ("0", "1", "1")]
        pool = {r[0].rsplit("-h", 1)[0] for r in rows}
        assert len(pool) == 1
        drained = rows[0][0]
        kubectl("drain", drained, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s")
        kubectl(
            "wait",
            "raycluster/local-tpu",
            "--for=jsonpath={.status.readyWorkerSlices}=1",
            "--timeout=120s",
        )
        after = kubectl(
            "get", "pods", "-l", "ray.io/node-type=worker", "-o", columns, "--no-headers"
        ).split("\n")
        moved = sorted((line.split() for line in after if line), key=lambda r: (r[1], r[2]))
        assert len(moved) == 2
        assert {r[0].rsplit("-h", 1)[0] for r in moved}.isdisjoint(pool)
        # Make-before-break: the stand-in was made while the old slice still held index 0.
        assert [(r[2], r[3]) for r in moved] == [("0", "0"), ("1", "1")]
        assert len({r[1] for r in moved}) == 1
    finally:
        err = stop_dev(process)
    assert process.returncode == 0, err
