"""Hostile RayClusters (tests/hardening/corpus/*.yaml) against the pure layers and the operator.

Each file says in its header what must happen:
- ``# schema: admits|rejects``: the verdict of the shipped CRD's openAPIV3Schema (a real API
  server rejects at admission what it rejects; the dev cluster does not enforce CRD schemas,
  so the operator's own validation is exercised on every file);
- ``# expect: rejected [<path>]``: the API server refuses the object itself (not an object, bad
  name; with a path, a CRD's CEL rule at that path, which the pure layers never see);
- ``# expect: invalid <path> pods=<n>``: accepted, then the InvalidSpec condition and a Warning
  Event naming <path>, and nothing created for the invalid part (n pods in all);
- ``# expect: valid pods=<n>``: accepted and run (n pods in all, every ray.io label ours);
- ``# expect: ignored``: another controller's cluster, left alone;
- ``# expect: bounded``: valid but huge; checked in the pure layer only (the plan is bounded).
"""

from __future__ import annotations

import gc
import itertools
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from devkube.server.schema import structural
from raycluster_operator.api.validation import parse_cluster
from raycluster_operator.controller.crds import crd_manifest
from raycluster_operator.kube import EVENTS, PODS, RAYCLUSTERS, KubeError
from raycluster_operator.planning import ClusterState, PlanContext, plan_cluster
from tests.harness.hardening_world import World, cpu_group, eventually, labels, raycluster, world

CORPUS = Path(__file__).parent / "corpus"
FILES = sorted(CORPUS.glob("*.yaml"))


@dataclass(frozen=True)
class Expectation:
    outcome: str  # rejected | invalid | valid | ignored | bounded
    path: str = ""
    pods: int = 0
    schema_admits: bool = True


def expectation(path: Path) -> Expectation:
    header = {}
    for line in path.read_text().splitlines():
        match = re.match(r"# (schema|expect): (.*)$", line)
        if match:
            header[match.group(1)] = match.group(2).strip()
    words = header["expect"]
    pods = re.search(r" pods=(\d+)$", words)
    if pods:
        words = words[: pods.start()]
    outcome, _, field = words.partition(" ")
    return Expectation(
        outcome, field, int(pods.group(1)) if pods else 0, header["schema"].split()[0] == "admits"
    )


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def test_the_corpus_is_large_and_every_file_says_what_must_happen() -> None:
    assert len(FILES) >= 40
    outcomes = [expectation(f).outcome for f in FILES]
    assert {"rejected", "invalid", "valid", "ignored", "bounded"} <= set(outcomes)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_the_crd_schema_verdict_is_as_recorded(path: Path) -> None:
    """The dev API server's structural-schema verdict (defaults, then validation, as
    kube-apiserver does), not a generic JSON Schema validator's."""
    schema = crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    causes = structural.apply(load(path), schema).causes
    assert (not causes) == expectation(path).schema_admits, causes


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_the_pure_layers_report_or_plan_every_file(path: Path) -> None:
    """parse_cluster never raises; planning names the recorded path and touches nothing
    invalid; a huge valid cluster gets a bounded plan (memory bounded too)."""
    want = expectation(path)
    counter = itertools.count()
    before = rss_bytes()
    obj = load(path)
    cluster, problems = parse_cluster(obj)
    if cluster is not None:
        now = datetime(2026, 1, 1, tzinfo=UTC)
        context = PlanContext(ClusterState(obj), now, lambda: f"{next(counter):05d}")
        plan = plan_cluster(cluster, context)
        problems = list(plan.problems)
    assert rss_bytes() - before < 400 * 1024 * 1024
    paths = [p.path for p in problems]
    if want.outcome == "invalid":
        assert want.path in paths
        if cluster is not None:
            groups = {c.group for c in plan.creates}
            assert all(not want.path.startswith(_group_path(cluster, g)) for g in groups)
            assert len(plan.creates) == want.pods
    elif want.outcome == "rejected":
        if cluster is not None and not want.path:  # a name the API server refuses: so does planning
            assert "metadata.name" in paths
    elif want.outcome in ("valid", "ignored"):
        assert problems == [], problems
        assert cluster is not None
        if want.outcome == "valid":
            assert len(plan.creates) == want.pods
    else:
        assert want.outcome == "bounded"
        assert problems == []
        assert 0 < len(plan.creates) <= 20_001


def _group_path(cluster: Any, group: str) -> str:
    names = [g.group_name for g in cluster.spec.worker_group_specs]
    return f"spec.workerGroupSpecs[{names.index(group)}]" if group in names else "-"


LIVE = [f for f in FILES if expectation(f).outcome != "bounded"]


async def test_the_operator_stays_healthy_and_exact_through_the_whole_corpus() -> None:
    async with world(["cpu:8"]) as w:
        op = await w.start_operator(health_addr="127.0.0.1:0", resync_period=1.0)
        assert op.manager.health_server is not None
        health = f"http://127.0.0.1:{op.manager.health_server.port}/healthz"
        await w.create(raycluster("bystander", [cpu_group("w", 2)]))
        await eventually(lambda: w.converged("bystander"))

        gc.collect()
        before = rss_bytes()
        admitted: dict[Path, str] = {}
        for path in LIVE:
            want = expectation(path)
            try:
                created = await w.kube.create(RAYCLUSTERS, load(path), namespace="default")
            except KubeError as exc:
                # The dev server enforces the CRD's schema as kube-apiserver does.
                assert want.outcome == "rejected" or not want.schema_admits, (path.name, exc)
                assert exc.code in (400, 422), (path.name, exc.code)
                continue
            assert want.outcome != "rejected", path.name
            assert want.schema_admits, f"{path.name}: the schema should have refused it"
            w.checker.note_write(created)
            admitted[path] = created["metadata"]["name"]

        # Meanwhile the bystander keeps converging through a change.
        await w.set_group("bystander", "w", replicas=3)
        await eventually(lambda: w.converged("bystander"), within=30)

        for path, name in admitted.items():
            await eventually(lambda p=path, n=name: _outcome(w, p, n), within=30)  # type: ignore[misc]

        async with aiohttp.ClientSession() as http, http.get(health) as resp:
            assert resp.status == 200
        reconciles = op.manager.reconciles

        async def still_reconciling() -> None:  # resyncs go on
            assert op.manager.reconciles > reconciles

        await eventually(still_reconciling, within=30)
        gc.collect()
        after = rss_bytes()
        print(
            f"\n{len(LIVE)} corpus files, {len(admitted)} admitted; test process RSS (dev "
            f"cluster and operator) {before / 1e6:.0f} MB -> {after / 1e6:.0f} MB"
        )
        # The dev cluster now stores ~55 more clusters and their pods; the operator must not
        # have materialised anything huge (a 10^6-host plan alone would be gigabytes).
        assert after - before < 200 * 1024 * 1024
        assert not task_failed(op)
        assert w.checker.violations == []
        assert w.checker.spec_violations() == []
        # Nothing escaped into another namespace.
        assert (await w.kube.list(PODS, "kube-system")).items == []


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def task_failed(op: Any) -> bool:
    return bool(op.task.done())


async def _outcome(w: World, path: Path, name: str) -> None:
    want = expectation(path)
    obj = await w.kube.get(RAYCLUSTERS, "default", name)
    pods = [p for p in await w.pods(name) if not p["metadata"].get("deletionTimestamp")]
    status = obj.get("status") or {}
    assert len(pods) == want.pods, (path.name, len(pods), want.pods)
    if want.outcome == "ignored":
        assert status == {}
        return
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    if want.outcome == "invalid":
        invalid = conditions.get("InvalidSpec")
        assert invalid is not None and invalid["status"] == "True", (path.name, conditions)
        assert want.path in invalid["message"], (path.name, invalid["message"])
        events = [
            e
            for e in (await w.kube.list(EVENTS, "default")).items
            if (e.get("regarding") or {}).get("name") == name and e.get("reason") == "InvalidSpec"
        ]
        assert events and all(e["type"] == "Warning" for e in events), path.name
        assert any(want.path in (e.get("note") or "") for e in events), path.name
        return
    assert want.outcome == "valid"
    assert "InvalidSpec" not in conditions or conditions["InvalidSpec"]["status"] == "False"
    for pod in pods:
        lbl = labels(pod)
        assert lbl["ray.io/cluster"] == name
        assert pod["metadata"]["namespace"] == "default"
        owners = pod["metadata"].get("ownerReferences") or []
        assert [o["kind"] for o in owners] == ["RayCluster"], (path.name, owners)
        if lbl["ray.io/node-type"] == "worker":
            assert lbl["ray.io/group"] != "headgroup"
            assert lbl.get("ray.io/worker-group-replica-index") != "99"
            assert lbl.get("ray.io/worker-group-replica-name") != "stolen-xxxxx"
