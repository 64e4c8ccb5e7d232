"""`/openapi/v3` for built-in kinds, as kubectl reads it: explain, and apply's own checks.

kube-apiserver publishes every built-in kind's schema with its descriptions; kubectl explain
walks it, and kubectl apply asks it before sending an object (a kind the server does not
serve must fail with kubectl's `no matches for kind`, not a download error).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from test_compat_kubectl import Kubectl

from devkube.server import ApiServer
from raycluster_operator.controller.crds import crd_manifest

DEPLOY = Path(__file__).parent.parent.parent / "deploy"

RAYJOB = """
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: job}
spec: {entrypoint: python -c 'print(1)'}
"""

CRONJOB = """
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 0 * * *"
  jobTemplate:
    spec: {template: {spec: {containers: [{name: c, image: "busybox:1"}], restartPolicy: Never}}}
"""


@pytest.fixture
def kubectl(server: ApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl.for_cluster(server, tmp_path)


async def test_explain_reaches_built_in_leaves(kubectl: Kubectl) -> None:
    _, out, _ = await kubectl("explain", "pods.spec.containers.resources")
    assert "FIELD: resources <ResourceRequirements>" in out
    assert "limits\t<map[string]Quantity>" in out or "limits" in out
    assert "Compute Resources required by this container" in out
    _, out, _ = await kubectl("explain", "deploy.spec.strategy")
    assert "FIELD: strategy <DeploymentStrategy>" in out
    assert "rollingUpdate" in out
    _, out, _ = await kubectl("explain", "pdb.spec.unhealthyPodEvictionPolicy")
    assert "IfHealthyBudget" in out


async def test_explain_of_a_recursive_field(kubectl: Kubectl) -> None:
    _, out, _ = await kubectl("explain", "pods.spec", "--recursive")
    assert "containers\t<[]Container> -required-" in out or "containers" in out
    assert "nodeSelector" in out


async def test_apply_of_an_unserved_kind_says_no_matches(kubectl: Kubectl) -> None:
    await kubectl("apply", "-f", "-", stdin=__import__("yaml").safe_dump(crd_manifest()))
    await kubectl(
        "wait", "--for", "condition=established", "crd/rayclusters.ray.io", "--timeout=10s"
    )
    rc, _, err = await kubectl("apply", "-f", "-", stdin=RAYJOB, ok=False)
    assert rc != 0
    assert 'no matches for kind "RayJob" in version "ray.io/v1"' in err
    assert "failed to download openapi" not in err
    rc, _, err = await kubectl("apply", "-f", "-", stdin=CRONJOB, ok=False)
    assert rc != 0
    assert 'no matches for kind "CronJob" in version "batch/v1"' in err


def test_the_openapi_file_is_current() -> None:
    """deploy/k8s_openapi.py writes it; run it (or deploy/generate.py) after the served
    built-in kinds change."""
    sys.path.insert(0, str(DEPLOY))
    try:
        generator = importlib.import_module("k8s_openapi")
    finally:
        sys.path.remove(str(DEPLOY))
    assert generator.OUT.read_bytes() == generator.render()
