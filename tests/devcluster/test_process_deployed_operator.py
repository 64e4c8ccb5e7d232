"""The operator installed as production installs it, running for real in the dev cluster.

`kubectl apply -k deploy/overlays/dev` on a process-runtime dev cluster: the Deployment's two
pods run `raycluster-operator run --leader-elect` as local processes, configured in-cluster
from the mounted service account (token, CA, namespace) and KUBERNETES_SERVICE_*, probed on
their pod IP, one of them leading through the Lease. A RayCluster converges; the leader's pod
is deleted, the standby takes over (measured: 0.4-1.4 s, the leader releases the Lease on
SIGTERM), and a scale-up still converges.
(Run under `flock /tmp/realray.lock`: process-runtime pod IPs are per machine.)
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from devkube import DevCluster
from tests.harness import manifests as m
from tests.harness.cluster import running_cluster
from tests.harness.examples import DEPLOY
from tests.harness.waiting import eventually

pytestmark = pytest.mark.process_runtime

DEV_OVERLAY = DEPLOY / "overlays" / "dev"
NS = "raycluster-operator"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/raycluster-operator-leader"
# The pods' own commands block before `ray start`: no Ray is needed to see the slices converge.
BLOCK = ["sleep", "infinity"]
# No Ray answers KubeRay's probes here, so the pods bring their own (a user's probes are kept,
# docs/design.md, rule 3.4c).
NO_RAY_PROBES = {
    "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
    "livenessProbe": {"exec": {"command": ["true"]}},
}

SMALL = {"cpu": "100m", "memory": "128Mi"}
RAYCLUSTER = m.raycluster(
    "slices",
    m.head_group(m.container("ray-head", command=BLOCK, limits=SMALL, **NO_RAY_PROBES)),
    [
        m.worker_group(
            "tpu",
            m.template(
                m.container(
                    "ray-worker",
                    command=BLOCK,
                    limits={**SMALL, "google.com/tpu": "4"},
                    **NO_RAY_PROBES,
                ),
                nodeSelector=dict(m.V5P_2X2X2),
            ),
            replicas=1,
            min_replicas=0,
            max_replicas=2,
            hosts=2,
        )
    ],
    rayVersion=None,
)


def ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@pytest.fixture
async def dev_cluster() -> Any:
    """The shared `kubectl` fixture drives this cluster (it overrides conftest's)."""
    async with running_cluster(
        nodes=["tpu:v5p:2x2x2:2", "cpu:2"], runtime="process", kubelet_delay=0.05
    ) as running:
        yield running


async def workers_converged(cluster: DevCluster, slices: int) -> None:
    listed = await cluster.client.list(
        "/api/v1/namespaces/default/pods", labelSelector="ray.io/cluster=slices"
    )
    pods = [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]
    workers = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
    assert len(workers) == 2 * slices and all(map(ready, pods)), [
        (p["metadata"]["name"], (p.get("status") or {}).get("phase")) for p in pods
    ]
    indices = {
        (
            p["metadata"]["labels"]["ray.io/worker-group-replica-index"],
            p["metadata"]["labels"]["ray.io/replica-host-index"],
        )
        for p in workers
    }
    assert indices == {(str(r), str(h)) for r in range(slices) for h in range(2)}
    rc = await cluster.client.get("/apis/ray.io/v1/namespaces/default/rayclusters/slices")
    assert (rc.get("status") or {}).get("readyWorkerReplicas") == 2 * slices


async def test_kubectl_apply_k_runs_the_operator_in_cluster_with_a_leader(
    dev_cluster: DevCluster, kubectl: Any
) -> None:
    cluster = dev_cluster
    applied = await kubectl("apply", "-k", str(DEV_OVERLAY))
    assert applied.returncode == 0, applied.stderr
    status = await kubectl(
        "rollout", "status", "deploy/raycluster-operator", "-n", NS, "--timeout=120s"
    )
    assert status.returncode == 0, status.stderr + status.stdout
    shown = (await kubectl("get", "deploy", "-n", NS, "--no-headers")).stdout.split()
    assert shown[:4] == ["raycluster-operator", "2/2", "2", "2"]

    pods = json.loads((await kubectl("get", "pods", "-n", NS, "-o", "json")).stdout)["items"]
    assert len(pods) == 2 and all(map(ready, pods))
    lease = await eventually(lambda: _holder(cluster), 60)
    assert lease in {p["metadata"]["name"] for p in pods}  # identity = POD_NAME
    logs = (await kubectl("logs", "-n", NS, f"pod/{lease}")).stdout
    assert "raycluster-operator starting as " + lease in logs

    await kubectl("apply", "-f", "-", input=yaml.safe_dump(RAYCLUSTER))
    await eventually(lambda: workers_converged(cluster, 1), 90)

    # Delete the leader's pod at once (no grace period): the standby takes the Lease, which
    # the stopping leader releases (a crashed one would hold it until it expires, 15 s).
    killed = await kubectl(
        "delete", "pod", "-n", NS, lease, "--grace-period=0", "--force", "--wait=false"
    )
    assert killed.returncode == 0, killed.stderr
    patch = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2}]
    await kubectl("patch", "raycluster", "slices", "--type", "json", "-p", json.dumps(patch))
    await eventually(lambda: workers_converged(cluster, 2), 90)
    new_leader = await eventually(lambda: _holder(cluster, not_=lease), 60)
    assert new_leader != lease

    # The ReplicaSet replaced the killed pod and the Deployment rolls out complete again.
    status = await kubectl(
        "rollout", "status", "deploy/raycluster-operator", "-n", NS, "--timeout=120s"
    )
    assert status.returncode == 0, status.stderr + status.stdout


async def _holder(cluster: DevCluster, not_: str | None = None) -> str:
    lease = await cluster.client.get(LEASE)
    holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
    assert holder and holder != not_, holder
    return holder


def test_dev_deployed_runs_the_operator_as_a_deployment(tmp_path: Path) -> None:
    """`raycluster-operator dev --deployed`: the kubeconfig appears once the operator's
    Deployment is rolled out, and a RayCluster applied with --apply converges."""
    kubeconfig = tmp_path / "kubeconfig"
    example = tmp_path / "slices.yaml"
    example.write_text(yaml.safe_dump(RAYCLUSTER))
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "raycluster_operator", "dev", "--deployed"),
            *("--runtime", "process", "--kubeconfig", str(kubeconfig)),
            *("--nodes", "tpu:v5p:2x2x2:1", "--nodes", "cpu:2", "--apply", str(example)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    kubectl = [str(Path(sys.executable).parent / "kubectl"), f"--kubeconfig={kubeconfig}"]
    try:
        deadline = time.monotonic() + 240  # a hang guard, not a performance limit
        while not kubeconfig.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the kubeconfig never appeared"
            time.sleep(0.2)
        shown = subprocess.run(
            [*kubectl, "get", "deploy", "-n", NS, "--no-headers"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.stdout.split()[:4] == ["raycluster-operator", "2/2", "2", "2"], shown
        while True:
            pods = subprocess.run(
                [*kubectl, "get", "pods", "-l", "ray.io/cluster=slices", "-o", "json"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            items = json.loads(pods.stdout)["items"]
            if len(items) == 3 and all(map(ready, items)):
                break
            assert time.monotonic() < deadline, [p["metadata"]["name"] for p in items]
            time.sleep(0.5)
    finally:
        process.send_signal(signal.SIGTERM)
        _out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err[-3000:]
