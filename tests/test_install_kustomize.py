"""deploy/ is a kustomize base with overlays; kubectl's built-in kustomize renders the same
objects that `raycluster-operator manifests all` prints, and deploy/generate.py is current."""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

import kustomize_render
from raycluster_operator.cli import main

ROOT = Path(__file__).parents[1]
DEPLOY = ROOT / "deploy"

Key = tuple[str, str, str, str]


def keyed(objects: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    out: dict[Key, dict[str, Any]] = {}
    for obj in objects:
        meta = obj["metadata"]
        key = (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])
        assert key not in out, f"{key} twice"
        out[key] = obj
    return out


def kustomize(overlay: str) -> list[dict[str, Any]]:
    return kustomize_render.kustomize(DEPLOY / overlay)


def manifests(*args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["manifests", "all", *args])
    assert result.exit_code == 0, result.output
    return kustomize_render.documents(result.output)


@pytest.mark.parametrize(
    ("overlay", "args"),
    [("overlays/cluster", ()), ("base", ()), ("overlays/namespaced", ("--watch-namespace", "ray"))],
)
def test_kustomize_renders_what_manifests_all_prints(overlay: str, args: tuple[str, ...]) -> None:
    rendered, printed = keyed(kustomize(overlay)), keyed(manifests(*args))
    assert sorted(rendered) == sorted(printed)
    for key, obj in printed.items():
        assert rendered[key] == obj, key


def test_the_namespaced_overlay_grants_cluster_wide_only_reading_nodes() -> None:
    """Changed on purpose with host-loss failover: Nodes are cluster-scoped, so the namespaced
    install holds one ClusterRole, get/list/watch on nodes, and nothing else cluster-wide."""
    objects = kustomize("overlays/namespaced")
    cluster_wide = [o for o in objects if o["kind"] in {"ClusterRole", "ClusterRoleBinding"}]
    assert {(o["kind"], o["metadata"]["name"]) for o in cluster_wide} == {
        ("ClusterRole", "raycluster-operator-nodes"),
        ("ClusterRoleBinding", "raycluster-operator-nodes"),
    }
    role = next(o for o in cluster_wide if o["kind"] == "ClusterRole")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}
    ]
    deployment = next(o for o in kustomize("overlays/namespaced") if o["kind"] == "Deployment")
    assert "--namespace=ray" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_the_dev_overlay_runs_the_local_operator_on_the_pod_ip() -> None:
    objects = kustomize("overlays/dev")
    assert {k[:2] for k in keyed(objects)} == {k[:2] for k in keyed(kustomize("overlays/cluster"))}
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["raycluster-operator"]
    assert "--health-addr=$(POD_IP):8082" in container["args"]
    assert "--leader-elect" in container["args"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert deployment["spec"]["replicas"] == 2


def test_dev_deployed_applies_what_the_dev_overlay_renders() -> None:
    from raycluster_operator.devcluster.attach import deployed_manifests

    rendered, built = keyed(kustomize("overlays/dev")), keyed(deployed_manifests())
    assert sorted(rendered) == sorted(built)
    for key, obj in built.items():
        assert rendered[key] == obj, key


def test_the_generated_yaml_is_current(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "overlays" / "namespaced").mkdir(parents=True)
    (tmp_path / "base").mkdir()
    monkeypatch.syspath_prepend(str(DEPLOY))
    script = runpy.run_path(str(DEPLOY / "generate.py"))
    script["main"].__globals__["HERE"] = tmp_path
    # The Kubernetes schema files it also regenerates live in src/; tests/api/test_crd.py
    # holds those current, so this run writes only the YAML into tmp_path.
    script["main"].__globals__["k8s_schemas"] = SimpleNamespace(main=lambda: None)
    script["main"].__globals__["k8s_protobuf"] = SimpleNamespace(main=lambda: None)
    script["main"].__globals__["k8s_openapi"] = SimpleNamespace(main=lambda: None)
    script["main"]()
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.yaml"))
    assert written, "generate.py wrote nothing"
    for relative in written:
        assert (DEPLOY / relative).read_text() == (tmp_path / relative).read_text(), (
            f"deploy/{relative} is stale: run .venv/bin/python deploy/generate.py"
        )


def test_no_generated_file_uses_yaml_anchors() -> None:
    for path in DEPLOY.rglob("*.yaml"):
        text = path.read_text()
        assert "&id0" not in text and "*id0" not in text, path
