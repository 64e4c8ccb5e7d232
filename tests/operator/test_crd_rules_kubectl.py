"""KubeRay's CEL rules on RayCluster, under KubeRay's CRD and under ours, through the real
kubectl against the dev cluster: ``spec.managedBy`` takes one of two values and, once set,
cannot change (it may still be set later or dropped: transition rules need an old and a new
value); v1.7's GCS backend cannot change. The messages are kube-apiserver's, as kubectl
prints them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kuberay_crd import kuberay_crd

from devkube.server import ApiServer
from raycluster_operator.controller.crds import crd_manifest
from tests.harness.kubectl import KubectlEnv
from tests.harness.manifests import container, head_group, raycluster

pytestmark = pytest.mark.control_planes

OUTSIDE = (
    'The RayCluster "rc" is invalid: spec.managedBy: Invalid value: "ray.io/raycluster-operator": '
    "the managedBy field value must be either 'ray.io/kuberay-operator' or "
    "'kueue.x-k8s.io/multikueue'"
)
IMMUTABLE = (
    'The RayCluster "rc" is invalid: spec.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": '
    "the managedBy field is immutable"
)


class Kubectl(KubectlEnv):
    within = 30
    __call__ = KubectlEnv.run


@pytest.fixture
async def server() -> Any:
    async with ApiServer() as srv:
        yield srv


@pytest.fixture(params=["ours", "kuberay"])
async def kubectl(request: Any, server: ApiServer, tmp_path: Path) -> Kubectl:
    make: Callable[[], dict[str, Any]] = crd_manifest if request.param == "ours" else kuberay_crd
    run = Kubectl.for_cluster(server, tmp_path)
    await run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(make()))
    await run("wait", "--for", "condition=established", "crd/rayclusters.ray.io")
    return run


def cluster(**spec: Any) -> str:
    return json.dumps(raycluster("rc", head_group(container("ray-head")), [], **spec))


async def refused(kubectl: Kubectl, *args: str, stdin: str | None = None) -> str:
    code, out, err = await kubectl(*args, stdin=stdin, ok=False)
    assert code != 0, out
    return str(err).strip()


async def test_a_managed_by_outside_kuberays_list_is_refused(kubectl: Kubectl) -> None:
    err = await refused(
        kubectl, "create", "-f", "-", stdin=cluster(managedBy="ray.io/raycluster-operator")
    )
    assert err == OUTSIDE


async def test_managed_by_cannot_change(kubectl: Kubectl) -> None:
    await kubectl("apply", "-f", "-", stdin=cluster(managedBy="ray.io/kuberay-operator"))
    changed = cluster(managedBy="kueue.x-k8s.io/multikueue")
    assert await refused(kubectl, "apply", "-f", "-", stdin=changed) == IMMUTABLE
    patch = '{"spec":{"managedBy":"kueue.x-k8s.io/multikueue"}}'
    err = await refused(kubectl, "patch", "raycluster", "rc", "--type=merge", "-p", patch)
    assert err == IMMUTABLE
    # An unrelated change of a cluster with managedBy set is fine.
    await kubectl("patch", "raycluster", "rc", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    # Both rules fail: kube-apiserver reports both causes in order, kubectl one per line.
    err = await refused(
        kubectl, "patch", "raycluster", "rc", "--type=merge", "-p", '{"spec":{"managedBy":"x"}}'
    )
    assert err == (
        'The RayCluster "rc" is invalid: \n* spec.managedBy: Invalid value: "x": the '
        'managedBy field is immutable\n* spec.managedBy: Invalid value: "x": the '
        "managedBy field value must be either 'ray.io/kuberay-operator' or "
        "'kueue.x-k8s.io/multikueue'"
    )


async def test_managed_by_may_be_added_and_removed(kubectl: Kubectl) -> None:
    """As in kube-apiserver: a transition rule (``self == oldSelf``) runs only when the field
    has an old value and a new one, so setting it later or dropping it passes; the value
    itself is still checked."""
    await kubectl("create", "-f", "-", stdin=cluster())
    outside = '{"spec":{"managedBy":"ray.io/raycluster-operator"}}'
    err = await refused(kubectl, "patch", "raycluster", "rc", "--type=merge", "-p", outside)
    assert err == OUTSIDE
    for patch in (
        '{"spec":{"managedBy":"ray.io/kuberay-operator"}}',
        '{"spec":{"managedBy":null}}',
    ):
        await kubectl("patch", "raycluster", "rc", "--type=merge", "-p", patch)


async def test_the_gcs_backend_is_immutable_and_redis_address_optional(kubectl: Kubectl) -> None:
    await kubectl(
        "create", "-f", "-", stdin=cluster(gcsFaultToleranceOptions={"backend": "rocksdb"})
    )
    patch = '{"spec":{"gcsFaultToleranceOptions":{"backend":"redis"}}}'
    err = await refused(kubectl, "patch", "raycluster", "rc", "--type=merge", "-p", patch)
    assert err == (
        'The RayCluster "rc" is invalid: spec.gcsFaultToleranceOptions.backend: Invalid value: '
        '"redis": gcsFaultToleranceOptions.backend is immutable'
    )
    # Dropping the options is no transition, so it passes, as in kube.
    drop = '{"spec":{"gcsFaultToleranceOptions":null}}'
    await kubectl("patch", "raycluster", "rc", "--type=merge", "-p", drop)
