"""The operator with KubeRay's CRD installed instead of ours, as most users run it.

User path: the dev cluster, the KubeRay-shaped CRD (kuberay_crd.py), the operator, and the real
kubectl applying the repository's example. The cluster converges; at steady state the operator
writes nothing (the RayCluster's resourceVersion stays put over several resyncs and after a
metadata change, which before crdfit.py caused a status write each time); the planner's rules
hold (scale up, scale down, a broken slice replaced whole); and a spec extension of ours that
KubeRay's schema prunes is reported with a Warning Event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kuberay_crd import KUBERAY_STATUS_FIELDS, KUBERAY_V17_FIELDS, kuberay_crd

from tests.harness.examples import example, load_example
from tests.harness.kubectl import KubectlEnv
from tests.harness.operator_world import NODES, World, eventually, ready, replica_names
from tests.harness.world import open_world

pytestmark = pytest.mark.control_planes

EXAMPLE = example("tpu-v6e-4x4")


class Kubectl(KubectlEnv):
    """(exit code, stdout, stderr), whatever the exit code."""

    async def __call__(self, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        result: tuple[int, str, str] = await self.run(*args, stdin=stdin, ok=False)
        return result


@pytest.fixture
async def kuberay_world(tmp_path: Path) -> AsyncIterator[tuple[World, Kubectl]]:
    async with open_world(World, NODES, crd=kuberay_crd()) as world:
        kubectl = Kubectl(world.cluster.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)
        yield world, kubectl


def test_the_fixture_has_kuberays_shape() -> None:
    schema = kuberay_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    text = json.dumps(schema)
    assert "x-kubernetes-preserve-unknown-fields" not in json.dumps(schema["properties"]["status"])
    assert set(schema["properties"]["status"]["properties"]) == KUBERAY_STATUS_FIELDS
    spec = schema["properties"]["spec"]["properties"]
    assert "idleSuspend" not in spec and "idleTerminationOptions" not in spec
    assert '"description"' not in text
    assert '"x-kubernetes-preserve-unknown-fields": true' not in json.dumps(
        schema["properties"]["spec"]["properties"]["workerGroupSpecs"]
    )


async def _version(world: World, name: str) -> str:
    return str((await world.get_cluster(name))["metadata"]["resourceVersion"])


@pytest.mark.parametrize("crd_readable", [True, False], ids=["crd-read", "crd-forbidden"])
async def test_converges_and_writes_nothing_at_steady_state(
    kuberay_world: tuple[World, Kubectl], crd_readable: bool
) -> None:
    """With the CRD readable the status is pruned by its schema; without (a namespaced
    install has no cluster-scoped grant) the pruning is learned from the first write."""
    world, kubectl = kuberay_world
    if not crd_readable:
        world.cluster.faults.fail("get", "customresourcedefinitions", code=403)
    # A short resync: the bug this guards against rewrote status on every resync.
    op = await world.start_operator(resync_period=0.5)
    rc, _, err = await kubectl("apply", "-f", str(EXAMPLE))
    assert rc == 0, err

    async def converged() -> None:
        pods = await world.workers("tpu-v6e")
        assert len(pods) == 8 and all(ready(p) for p in pods)
        status = (await world.get_cluster("tpu-v6e")).get("status") or {}
        assert status.get("state") == "ready"
        assert status.get("readyWorkerReplicas") == 8

    await eventually(converged, within=60)
    status = (await world.get_cluster("tpu-v6e"))["status"]
    # KubeRay's schema pruned our slice counts; only KubeRay's fields are stored.
    assert set(status) <= KUBERAY_STATUS_FIELDS
    assert "workerGroups" not in status

    async def settled() -> str:
        before = await _version(world, "tpu-v6e")
        await world.reconciled("tpu-v6e")
        assert await _version(world, "tpu-v6e") == before
        return before

    await eventually(settled, within=30)
    # Steady state: several resyncs and no write at all.
    before, writes = await _version(world, "tpu-v6e"), op.writes
    await world.reconciled("tpu-v6e", passes=3)
    assert await _version(world, "tpu-v6e") == before
    assert op.writes == writes
    # A metadata change is one write (ours, by kubectl) and the operator adds none.
    rc, _, err = await kubectl("annotate", "raycluster", "tpu-v6e", "team=ml")
    assert rc == 0, err
    annotated = await _version(world, "tpu-v6e")
    assert annotated != before
    await world.reconciled("tpu-v6e", passes=3)
    assert await _version(world, "tpu-v6e") == annotated
    assert op.writes == writes


async def test_planner_rules_hold(kuberay_world: tuple[World, Kubectl]) -> None:
    world, kubectl = kuberay_world
    await world.start_operator()
    rc, _, err = await kubectl("apply", "-f", str(EXAMPLE))
    assert rc == 0, err

    async def slices_of(n: int) -> set[str]:
        pods = await world.workers("tpu-v6e")
        assert len(pods) == 4 * n and all(ready(p) for p in pods)
        names = replica_names(pods)
        assert len(names) == n
        return names

    first = await eventually(lambda: slices_of(2), within=60)
    # Scale down to one slice, then up to two: whole slices each time.
    patch = '{"spec":{"workerGroupSpecs":[{"groupName":"tpu-v6e-4x4","replicas":1,%s}]}}'
    rest = json.dumps(_group_rest())[1:-1]
    rc, _, err = await kubectl("patch", "raycluster", "tpu-v6e", "--type=merge", "-p", patch % rest)
    assert rc == 0, err
    await eventually(lambda: slices_of(1), within=60)
    grown = patch.replace('"replicas":1', '"replicas":2') % rest
    rc, _, err = await kubectl("patch", "raycluster", "tpu-v6e", "--type=merge", "-p", grown)
    assert rc == 0, err
    names = await eventually(lambda: slices_of(2), within=60)
    # A broken host breaks its slice: all its hosts are replaced by a new slice.
    victim = next(
        p
        for p in await world.workers("tpu-v6e")
        if p["metadata"]["labels"].get("ray.io/replica-host-index") == "2"
    )
    broken_slice = victim["metadata"]["labels"]["ray.io/worker-group-replica-name"]
    rc, _, err = await kubectl("delete", "pod", victim["metadata"]["name"], "--wait=false")
    assert rc == 0, err

    async def replaced() -> None:
        now = await slices_of(2)
        assert broken_slice not in now

    await eventually(replaced, within=60)
    assert first and names


def _group_rest() -> dict[str, Any]:
    """The example's worker group without its name and replicas (a merge patch replaces the
    whole list, so it carries the rest of the group)."""

    doc = load_example("tpu-v6e-4x4")[0]
    group = dict(doc["spec"]["workerGroupSpecs"][0])
    group.pop("groupName")
    group.pop("replicas")
    return group


async def test_a_pruned_spec_extension_is_reported(kuberay_world: tuple[World, Kubectl]) -> None:
    world, kubectl = kuberay_world
    await world.start_operator()
    import yaml

    doc = load_example("tpu-v6e-4x4")[0]
    doc["metadata"]["name"] = "idle"
    doc["spec"]["workerGroupSpecs"][0]["replicas"] = 0
    doc["spec"]["idleTerminationOptions"] = {"policy": "Suspend", "timeoutSeconds": 600}
    text = yaml.safe_dump(doc)
    # kubectl's default (strict) validation refuses the field KubeRay's CRD does not declare.
    rc, _, err = await kubectl("apply", "-f", "-", stdin=text)
    assert rc != 0
    assert 'strict decoding error: unknown field "spec.idleTerminationOptions"' in err
    # Without validation the server prunes it silently; the operator says so.
    rc, _, err = await kubectl("apply", "--validate=false", "-f", "-", stdin=text)
    assert rc == 0, err
    stored = await world.get_cluster("idle")
    assert "idleTerminationOptions" not in stored["spec"]

    async def warned() -> None:
        rc, out, err = await kubectl(
            "get", "events", "--field-selector", "reason=SpecFieldsPruned", "-o", "json"
        )
        assert rc == 0, err
        items = json.loads(out)["items"]
        assert items, "no SpecFieldsPruned event"
        assert "spec.idleTerminationOptions" in items[0]["message"]
        assert items[0]["type"] == "Warning"

    await eventually(warned, within=30)


def test_the_operators_pruning_is_the_servers() -> None:
    """kube/pruning.py (what the operator expects the server to keep) against the dev API
    server's structural engine, on a status and a spec full of our extensions."""
    from devkube.server.schema import structural
    from raycluster_operator.kube import prune

    schema = kuberay_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

    obj = load_example("tpu-v6e-4x4")[0]
    obj["spec"]["idleSuspend"] = True
    obj["spec"]["workerGroupSpecs"][0]["numOfHost"] = 2
    del obj["spec"]["workerGroupSpecs"][0]["numOfHosts"]
    obj["status"] = {
        "state": "ready",
        "lastUpdateTime": None,
        "desiredWorkerSlices": 2,
        "workerGroups": [{"groupName": "g", "readySlices": 2}],
        "conditions": [
            {
                "type": "HeadPodReady",
                "status": "True",
                "reason": "HeadPodRunningAndReady",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "extra": 1,
            }
        ],
        "head": {"podIP": "10.0.0.1", "future": "x"},
    }
    ours, dropped = prune(obj, schema, root=True)
    assert ours == structural.prune(obj, schema)
    assert sorted(dropped) == sorted(structural.apply(obj, schema).unknown)
    assert ours["spec"]["workerGroupSpecs"][0]["numOfHosts"] == 1  # defaulted
    assert ours["status"]["lastUpdateTime"] is None  # nullable in KubeRay's schema
    assert "workerGroups" not in ours["status"] and "future" not in ours["status"]["head"]
    assert "extra" not in ours["status"]["conditions"][0]


def _pod_spec_with_every_defaulted_parent() -> dict[str, Any]:
    """A pod spec where each default of `KUBERAY_V17_DEFAULTS` has its parent and is unset."""
    ref = {"key": "k"}
    return {
        "imagePullSecrets": [{}],
        "containers": [
            {
                "name": "ray",
                "image": "rayproject/ray:2.60.0",
                "ports": [{"containerPort": 6379}],
                "env": [
                    {"name": "A", "valueFrom": {"configMapKeyRef": dict(ref)}},
                    {"name": "B", "valueFrom": {"secretKeyRef": dict(ref)}},
                    {"name": "C", "valueFrom": {"fileKeyRef": {"path": "p", "key": "k"}}},
                ],
                "envFrom": [{"configMapRef": {}}, {"secretRef": {}}],
                "livenessProbe": {"grpc": {"port": 8080}},
            }
        ],
        "volumes": [
            {"name": "a", "configMap": {}},
            {"name": "b", "projected": {"sources": [{"secret": {}}, {"configMap": {}}]}},
            {"name": "c", "azureDisk": {"diskName": "d", "diskURI": "u"}},
            {"name": "d", "iscsi": {"targetPortal": "t", "iqn": "q", "lun": 0}},
            {"name": "e", "rbd": {"monitors": ["m"], "image": "i"}},
            {"name": "f", "scaleIO": {"gateway": "g", "system": "s", "secretRef": {}}},
            {"name": "g", "csi": {"driver": "x", "nodePublishSecretRef": {}}},
        ],
    }


def test_kuberays_defaults_leave_every_pod_current() -> None:
    """The same cluster read through our CRD and through KubeRay's (which defaults far more:
    a port's protocol, a reference's empty name, a worker group's priority, ...; and each
    prunes the other's fields) has the same template hashes, so swapping the CRD either way
    outdates no pod (under ``Recreate``: deletes none)."""
    from devkube.server.schema import structural
    from raycluster_operator.api.models import load_cluster
    from raycluster_operator.builders.template_hash import head_template_hash, worker_template_hash
    from raycluster_operator.controller.crds import crd_manifest

    obj = load_example("tpu-v6e-4x4")[0]
    spec = obj["spec"]
    for group in (spec["headGroupSpec"], *spec["workerGroupSpecs"]):
        group["template"]["spec"] = _pod_spec_with_every_defaulted_parent()
    spec["headGroupSpec"]["headService"] = {"spec": {"ports": [{"port": 8265}]}}
    # v1.7's priority is kept by both; our maxUnavailable is pruned by KubeRay's
    spec["workerGroupSpecs"][0].update(priority=2, maxUnavailable=1)
    spec["enableInTreeAutoscaling"] = True
    secret = {"name": "A", "valueFrom": {"secretKeyRef": {"key": "k"}}}
    spec["autoscalerOptions"] = {"env": [secret], "command": ["x"], "args": ["y"]}
    spec["headGroupSpec"]["ingressOptions"] = {"host": "ray.example.com"}

    def read(crd: dict[str, Any]) -> dict[str, Any]:
        """``obj`` as the server reads it back through ``crd``."""
        read: dict[str, Any] = structural.prune(
            obj, crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        )
        return read

    def hashes(crd: dict[str, Any]) -> tuple[str, ...]:
        cluster = load_cluster(read(crd))
        workers = (worker_template_hash(cluster, g) for g in cluster.spec.worker_group_specs)
        return (head_template_hash(cluster), *workers)

    kuberays = read(kuberay_crd())
    text = json.dumps(kuberays)
    defaulted = text.count('"name": ""') + text.count('"TCP"')
    assert kuberays["spec"]["workerGroupSpecs"][0]["priority"] == 2
    assert "maxUnavailable" not in kuberays["spec"]["workerGroupSpecs"][0]
    ours = read(crd_manifest())
    assert ours["spec"]["workerGroupSpecs"][0]["priority"] == 2
    assert ours["spec"]["autoscalerOptions"]["command"] == ["x"]
    assert defaulted >= 2 * 9 + 2  # each pod spec's refs and port, the service's port
    before = hashes(kuberay_crd())
    assert before == hashes(crd_manifest())
    # v1.7's fields no builder reads shape no pod, whatever their value: the hash of a spec
    # stored before our CRD kept them is the hash of the same spec with them (§3.8)
    del spec["workerGroupSpecs"][0]["priority"], spec["headGroupSpec"]["ingressOptions"]
    spec["autoscalerOptions"] = {"env": [secret]}
    assert hashes(crd_manifest()) == before
    spec["workerGroupSpecs"][0].update(priority=2)
    # not blind: a value other than the default still shapes the pod
    spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = "UDP"
    after = hashes(kuberay_crd())
    assert after[0] == before[0] and after[1] != before[1]


def test_our_schema_has_every_field_of_kuberay_v17() -> None:
    """Nothing a v1.7 user stored is pruned by ours, and kubectl's strict validation refuses
    no v1.7 manifest (docs/design.md §3.7); the fields the operator does not act on are
    reported instead (rule 3a)."""
    from raycluster_operator.controller.crds import crd_manifest

    spec = crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    spec = spec["spec"]["properties"]
    ours = {
        "spec": set(spec),
        "workerGroupSpecs": set(spec["workerGroupSpecs"]["items"]["properties"]),
        "headGroupSpec": set(spec["headGroupSpec"]["properties"]),
        "autoscalerOptions": set(spec["autoscalerOptions"]["properties"]),
    }
    for where, fields in KUBERAY_V17_FIELDS.items():
        assert fields - ours[where] == set(), where
