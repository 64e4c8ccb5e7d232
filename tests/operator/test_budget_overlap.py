"""A user's own PodDisruptionBudget over a slice's pods (docs/design.md §4 rule 12b), by
kubectl as a team would write one: Kubernetes' eviction API refuses any pod two budgets select
(a 500), so with our per-slice budget beside it no drain could ever take a host. The operator
stands back for that group: its budget goes, the condition ``DisruptionBudgetOverlap`` and one
Warning name both budgets, an eviction is the user's budget's to allow; once the user's budget
goes, ours comes back. The user's budget is labelled with the cluster, and is never deleted
for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness.kubectl import KubectlEnv
from tests.harness.operator_world import SharedWorld, eventually, raycluster, tpu_group

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.control_planes]

OURS = "app.kubernetes.io/created-by=raycluster-operator"
REFUSAL = "This pod has more than one PodDisruptionBudget"


class Kubectl(KubectlEnv):
    async def __call__(self, *args: str, stdin: str | None = None, ok: bool = True) -> str:
        _, out, err = await self.run(*args, stdin=stdin, ok=ok)
        return str(out) + str(err)


def users_budget(name: str, namespace: str, cluster: str) -> dict[str, Any]:
    """Every pod of the cluster, at least one up: a common namespace-wide budget."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "labels": {"ray.io/cluster": cluster}},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"ray.io/cluster": cluster}}},
    }


def condition(cluster: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (cluster.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "DisruptionBudgetOverlap"), None)


async def evict(kubectl: Kubectl, namespace: str, pod: str) -> str:
    """The eviction subresource, as `kubectl drain` calls it for each pod."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": namespace},
    }
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction"
    return await kubectl("create", "--raw", path, "-f", "-", stdin=json.dumps(body), ok=False)


async def test_a_users_budget_over_a_slice_makes_ours_stand_back_until_it_goes(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    world = shared_world
    kubectl = Kubectl(world.cluster.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)
    ns, name = "overlap", "ovl"
    await kubectl("create", "namespace", ns)
    obj = raycluster(name, [tpu_group("tpu", replicas=1)])
    obj["metadata"]["namespace"] = ns
    await kubectl("apply", "-f", "-", stdin=yaml.safe_dump(obj))

    async def our_budgets(count: int) -> list[dict[str, Any]]:
        out = await kubectl("get", "pdb", "-n", ns, "-l", OURS, "-o", "json")
        items: list[dict[str, Any]] = json.loads(out)["items"]
        assert len(items) == count, items
        return items

    async def ours_settled() -> str:
        (budget,) = await our_budgets(1)
        assert (budget.get("status") or {}).get("currentHealthy") == 4
        return str(budget["metadata"]["name"])

    mine = await eventually(ours_settled, within=60)
    await kubectl("apply", "-f", "-", stdin=yaml.safe_dump(users_budget("team", ns, name)))

    async def stood_back() -> dict[str, Any]:
        await our_budgets(0)
        found = condition(await world.get_cluster(name, ns))
        assert found is not None and found["status"] == "True", found
        assert "PodDisruptionBudget team selects pods of worker group tpu" in found["message"]
        assert mine in found["message"]
        return found

    said = await eventually(stood_back, within=30)
    warnings = await kubectl(
        "get",
        "events",
        "-n",
        ns,
        "--field-selector",
        "reason=DisruptionBudgetOverlap",
        "-o",
        "json",
    )
    (warning,) = json.loads(warnings)["items"]
    assert warning["type"] == "Warning" and warning["message"] == said["message"]
    assert "team" in warning["message"] and mine in warning["message"]

    # A drain's eviction of one host is now the user's budget's to allow, not a 500.
    pods = [
        p for p in await world.pods(name, ns) if p["metadata"]["labels"]["ray.io/group"] == "tpu"
    ]
    answer = await evict(kubectl, ns, pods[0]["metadata"]["name"])
    assert REFUSAL not in answer, answer

    async def replaced() -> None:
        workers = [
            p
            for p in await world.pods(name, ns)
            if p["metadata"]["labels"]["ray.io/group"] == "tpu"
        ]
        assert len(workers) == 4 and all(
            p["metadata"]["name"] != pods[0]["metadata"]["name"] for p in workers
        )

    await eventually(replaced, within=60)
    await world.reconciled(name, ns, passes=2)
    await our_budgets(0)  # still standing back for the new slice
    assert await kubectl("get", "pdb", "-n", ns, "team", "-o", "name") == (
        "poddisruptionbudget.policy/team\n"
    )
    await kubectl("delete", "pdb", "-n", ns, "team")

    async def back() -> None:
        await our_budgets(1)
        found = condition(await world.get_cluster(name, ns))
        assert found is not None
        assert (found["status"], found["reason"]) == ("False", "NoDisruptionBudgetOverlap")

    await eventually(back, within=30)
    again = await kubectl(
        "get",
        "events",
        "-n",
        ns,
        "--field-selector",
        "reason=DisruptionBudgetOverlap",
        "-o",
        "json",
    )
    assert len(json.loads(again)["items"]) == 1  # one Warning, for the overlap's appearance
