"""KubeRay v1.7's fields on the user's path (docs/design.md §3.7, §4 rule 3a): kubectl applies
a v1.7 manifest under our CRD with strict validation, reads every value back unchanged, and
the operator runs the cluster while it names what it does not act on, in one Warning Event and
the ``UnsupportedFields`` condition, written once: nothing more at steady state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness.kubectl import KubectlEnv
from tests.harness.operator_world import SharedWorld, cpu_group, eventually, raycluster

# One cluster and operator for the module; a namespace per test.
pytestmark = pytest.mark.asyncio(loop_scope="module")

#: A KubeRay v1.7 spec's fields our CRD lacked before, and the ones the operator ignored.
V17_SPEC: dict[str, Any] = {
    "authOptions": {"mode": "token", "secretName": "ray-token"},
    "tlsOptions": {"enabled": True},
    "networkPolicy": {
        "mode": "DenyAllIngress",
        "head": {
            "ingressRules": [
                {
                    "from": [{"podSelector": {"matchLabels": {"app": "dashboard-proxy"}}}],
                    "ports": [{"port": 8265, "protocol": "TCP"}],
                }
            ]
        },
        "workerGroups": [
            {"groupName": "w", "egressRules": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]}
        ],
    },
    "historyServerOptions": {
        "collectorOptions": {
            "image": "rayproject/collector:1",
            "env": [{"name": "BUCKET", "value": "gs://logs"}],
            "resources": {"requests": {"cpu": "100m"}},
        }
    },
    "headServiceAnnotations": {"example.com/team": "ml"},
    "autoscalerOptions": {"command": ["ray-autoscaler"], "args": ["--verbose"]},
}
INGRESS = {"host": "ray.example.com", "path": "/", "pathType": "Prefix"}


class Kubectl(KubectlEnv):
    async def __call__(self, *args: str, stdin: str | None = None) -> str:
        _, out, _ = await self.run(*args, stdin=stdin)
        return str(out)


def v17_cluster(name: str, namespace: str) -> dict[str, Any]:
    obj = raycluster(name, [cpu_group("w", replicas=1, priority=5)])
    obj["metadata"]["namespace"] = namespace
    obj["spec"] |= json.loads(json.dumps(V17_SPEC))
    obj["spec"]["headGroupSpec"] |= {"enableIngress": True, "ingressOptions": INGRESS}
    return obj


def condition(cluster: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (cluster.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "UnsupportedFields"), None)


async def warnings(kubectl: Kubectl, namespace: str) -> list[dict[str, Any]]:
    selector = ("--field-selector", "reason=UnsupportedField")
    out = await kubectl("get", "events", "-n", namespace, *selector, "-o", "json")
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


async def test_a_v17_manifest_applies_reads_back_unchanged_and_is_warned_about_once(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    world = shared_world
    kubectl = Kubectl(world.cluster.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)
    ns, name = "v17-apply", "v17"
    await kubectl("create", "namespace", ns)
    sent = v17_cluster(name, ns)
    await kubectl("apply", "--validate=strict", "-f", "-", stdin=yaml.safe_dump(sent))

    stored = json.loads(await kubectl("get", "raycluster", name, "-n", ns, "-o", "json"))
    for field, value in V17_SPEC.items():
        assert stored["spec"][field] == value, field
    assert stored["spec"]["headGroupSpec"]["ingressOptions"] == INGRESS
    assert stored["spec"]["workerGroupSpecs"][0]["priority"] == 5

    async def running_and_said() -> None:
        pods = await world.pods(name, ns)
        kinds = sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods)
        assert kinds == ["head", "worker"]  # the cluster still runs
        said = condition(await world.get_cluster(name, ns))
        assert said is not None and said["status"] == "True"

    await eventually(running_and_said)
    await world.reconciled(name, ns)
    jsonpath = '{.status.conditions[?(@.type=="UnsupportedFields")].reason}'
    assert await kubectl("get", "raycluster", name, "-n", ns, "-o", f"jsonpath={jsonpath}") == (
        "UnsupportedFields"
    )
    said = condition(await world.get_cluster(name, ns))
    assert said is not None
    assert said["message"].startswith(
        "spec.authOptions: Ray token authentication is not configured by this operator; the "
        "cluster runs without it"
    )
    for field in ("tlsOptions", "networkPolicy", "headGroupSpec.ingressOptions"):
        assert f"spec.{field}: " in said["message"]
    [warning] = await warnings(kubectl, ns)
    assert warning["type"] == "Warning"
    assert warning["involvedObject"]["kind"] == "RayCluster"
    assert warning["involvedObject"]["name"] == name
    assert warning["message"].startswith(
        "the spec sets fields this operator does not act on; the cluster runs: spec.authOptions: "
    )
    assert "spec.autoscalerOptions.args: " in warning["message"]  # the last, not cut

    # Steady state: a few more passes write nothing and record no second Warning.
    version = (await world.get_cluster(name, ns))["metadata"]["resourceVersion"]
    await world.reconciled(name, ns, passes=3)
    assert (await world.get_cluster(name, ns))["metadata"]["resourceVersion"] == version
    [again] = await warnings(kubectl, ns)
    assert again.get("count", 1) == 1 and again["metadata"] == warning["metadata"]


async def test_clearing_the_fields_turns_the_condition_false_without_a_warning(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    world = shared_world
    kubectl = Kubectl(world.cluster.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)
    ns, name = "v17-clear", "v17c"
    await kubectl("create", "namespace", ns)
    obj = raycluster(name, [cpu_group("w", replicas=1)])
    obj["metadata"]["namespace"] = ns
    obj["spec"]["authOptions"] = {"mode": "token"}
    await kubectl("apply", "-f", "-", stdin=yaml.safe_dump(obj))

    async def said() -> None:
        found = condition(await world.get_cluster(name, ns))
        assert found is not None and found["status"] == "True"

    await eventually(said)
    patch = json.dumps({"spec": {"authOptions": {"mode": "disabled"}}})
    await kubectl("patch", "raycluster", name, "-n", ns, "--type", "merge", "-p", patch)
    await world.reconciled(name, ns)
    found = condition(await world.get_cluster(name, ns))
    assert found is not None
    assert (found["status"], found["reason"]) == ("False", "AllFieldsSupported")
    assert len(await warnings(kubectl, ns)) == 1  # the first list's, none for the clearing
