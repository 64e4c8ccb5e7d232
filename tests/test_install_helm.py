"""The Helm chart (deploy/helm/raycluster-operator), rendered and linted by real Helm: with its
default values it renders what `raycluster-operator manifests all` prints, its values switch the
operator's flags and RBAC as documented, its schema refuses bad values with a clear message,
and its generated files are current. (Install, upgrade and uninstall on the real control
plane: tests/test_install_helm_kubernetes.py.)"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from click.testing import CliRunner

import kustomize_render
from raycluster_operator.cli import helm_chart, main
from raycluster_operator.cli.run import parse_feature_gates
from raycluster_operator.cli.run import run as run_command
from raycluster_operator.controller import install
from tests.harness.examples import DEPLOY
from tests.harness.helm import CHART, Helm
from tests.harness.objects import Obj

NS = install.NAME
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(tmp_path_factory.mktemp("helm-home"))


def template(helm: Helm, *sets: str, crds: bool = False) -> list[Obj]:
    args = ["template", install.NAME, str(CHART), "--namespace", NS]
    args += [a for s in sets for a in ("--set", s)]
    if crds:
        args.append("--include-crds")
    return kustomize_render.documents(helm(*args).stdout)


def refusal(helm: Helm, *sets: str) -> str:
    args = ["template", install.NAME, str(CHART), "--namespace", NS]
    done = helm(*args, *(a for s in sets for a in ("--set", s)), ok=False)
    assert done.returncode != 0, done.stdout
    return done.stderr


def keyed(objects: list[Obj]) -> dict[tuple[str, str, str], Obj]:
    return {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
    }


def run_options(args: list[str]) -> Obj:
    """What `raycluster-operator run` would run with, given these arguments."""
    assert args[0] == "run", args
    params = dict(run_command.make_context("run", list(args[1:])).params)
    params["feature_gates"] = parse_feature_gates(params["feature_gates"])
    return params


def container(objects: list[Obj]) -> Obj:
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    return dict(deployment["spec"]["template"]["spec"]["containers"][0])


def printed(*args: str) -> list[Obj]:
    result = CliRunner().invoke(main, ["manifests", "all", *args])
    assert result.exit_code == 0, result.output
    return kustomize_render.documents(result.output)


def without_labels(obj: Obj) -> Obj:
    """The object less what Helm adds (its labels, the selectors on them) and the Deployment's
    arguments, which are compared as what `run` parses them to."""
    out = {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "labels"}}
    if obj["kind"] == "Deployment":
        spec = dict(obj["spec"])
        spec.pop("selector")
        pod = dict(spec["template"]["spec"])
        pod["containers"] = [
            {k: v for k, v in c.items() if k not in ("args", "imagePullPolicy")}
            for c in pod["containers"]
        ]
        spec["template"] = {"spec": pod}
        out["spec"] = spec
    if obj["kind"] == "Service":
        out["spec"] = {k: v for k, v in obj["spec"].items() if k not in ("selector", "type")}
    return out


@pytest.mark.parametrize(
    ("sets", "args"),
    [((), ()), (("watchNamespace={ray}",), ("--watch-namespace", "ray"))],
    ids=["cluster-wide", "watchNamespace"],
)
def test_default_values_render_what_manifests_all_prints(
    helm: Helm, sets: tuple[str, ...], args: tuple[str, ...]
) -> None:
    chart = keyed(template(helm, *sets, crds=True))
    # Helm leaves the namespace to `--create-namespace`; the budget is the chart's own.
    shipped = keyed([o for o in printed(*args) if o["kind"] != "Namespace"])
    pdb = chart.pop(("PodDisruptionBudget", NS, NS))
    assert sorted(chart) == sorted(shipped)
    for key, obj in shipped.items():
        assert without_labels(chart[key]) == without_labels(obj), key
        if obj["kind"] != "CustomResourceDefinition":
            assert install.LABELS.items() <= chart[key]["metadata"]["labels"].items(), key
    # The operator runs exactly as the kustomize install runs it.
    chart_args, shipped_args = (
        container(list(chart.values()))["args"],
        container(list(shipped.values()))["args"],
    )
    assert run_options(chart_args) == run_options(shipped_args)
    selector = chart[("Deployment", NS, NS)]["spec"]["selector"]["matchLabels"]
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": selector}}
    assert chart[("Service", NS, f"{NS}-metrics")]["spec"]["selector"] == selector


def test_helm_lint_passes_strict(helm: Helm) -> None:
    for sets in ((), ("watchNamespace={a,b}",), ("metrics.serviceMonitor.enabled=true",)):
        args = [a for s in sets for a in ("--set", s)]
        done = helm("lint", "--strict", str(CHART), *args)
        assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout, done.stdout


def test_watched_namespaces_get_roles_and_cluster_wide_only_the_node_reader(helm: Helm) -> None:
    objects = template(helm, "watchNamespace={tpu-a,tpu-b}")
    roles = {(o["kind"], o["metadata"].get("namespace")) for o in objects if "Role" in o["kind"]}
    assert roles == {
        ("Role", "tpu-a"),
        ("RoleBinding", "tpu-a"),
        ("Role", "tpu-b"),
        ("RoleBinding", "tpu-b"),
        ("Role", NS),  # the Lease
        ("RoleBinding", NS),
        ("ClusterRole", None),
        ("ClusterRoleBinding", None),
    }
    cluster_role = next(o for o in objects if o["kind"] == "ClusterRole")
    assert cluster_role["metadata"]["name"] == f"{NS}-nodes"
    assert cluster_role["rules"] == install.node_reader_rules()
    role = next(o for o in objects if o["kind"] == "Role" and o["metadata"]["namespace"] == "tpu-a")
    assert role["rules"] == install.operator_rules()
    assert run_options(container(objects)["args"])["namespaces"] == ("tpu-a", "tpu-b")


def test_single_namespace_install_has_no_cluster_scoped_object(helm: Helm) -> None:
    objects = template(
        helm, "singleNamespaceInstall=true", "lifecycle.hostLossFailover.enabled=false"
    )
    assert not [o for o in objects if o["kind"] in CLUSTER_SCOPED]
    assert {o["metadata"]["namespace"] for o in objects} == {NS}
    options = run_options(container(objects)["args"])
    assert options["namespaces"] == (NS,)
    assert options["unready_slice_timeout"] == 0  # Nodes are not watched: no grant needed


def test_values_switch_the_operator_flags_and_objects(helm: Helm) -> None:
    objects = template(
        helm,
        "leaderElectionEnabled=false",
        "replicas=1",
        "logging.stdoutEncoder=console",
        "featureGates[0].name=RayMultiHostIndexing",
        "featureGates[0].enabled=false",
        "lifecycle.sliceBackoff.enabled=false",
        "lifecycle.maintenanceWindowSeconds=600",
        "reconcileConcurrency=16",
        "kubeClient.qps=50.5",
        "metrics.enabled=false",
        "priorityClassName=system-cluster-critical",
        "podDisruptionBudget.enabled=false",
        "resources.limits.memory=1Gi",
        "fullnameOverride=rco",
    )
    kinds = {o["kind"] for o in objects}
    assert "Service" not in kinds and "PodDisruptionBudget" not in kinds
    assert not [o for o in objects if o["metadata"]["name"].endswith("leader-election")]
    options = run_options(container(objects)["args"])
    assert options["leader_elect"] is False and options["log_format"] == "text"
    assert options["feature_gates"] == {"RayMultiHostIndexing": False}
    assert options["slice_backoff_base"] == 0 and options["maintenance_window"] == 600
    assert options["reconcile_concurrency"] == 16 and options["qps"] == 50.5
    assert options["metrics_addr"] == "" and options["lease_name"] == "rco-leader"
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["priorityClassName"] == "system-cluster-critical"
    assert container(objects)["resources"]["limits"] == {"memory": "1Gi"}
    assert {o["metadata"]["name"] for o in objects if o["kind"] == "ClusterRole"} == {"rco"}


def test_service_monitor_is_optional(helm: Helm) -> None:
    assert "ServiceMonitor" not in {o["kind"] for o in template(helm)}
    objects = template(
        helm,
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.additionalLabels.release=prom",
    )
    monitor = next(o for o in objects if o["kind"] == "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s", "honorLabels": True}
    ]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("leaderElection=true", "additional properties 'leaderElection' not allowed"),
        ("replicas=0", "/replicas"),
        ("featureGates[0].name=RayNoSuchGate", "/featureGates/0/name"),
        ("watchNamespace={Team_A}", "/watchNamespace/0"),
        ("resources.limits.memory=lots", "/resources/limits/memory"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("lifecycle.sliceBackoff.baseSeconds=-1", "/lifecycle/sliceBackoff/baseSeconds"),
    ],
)
def test_the_schema_refuses_a_bad_value_naming_it(helm: Helm, value: str, said: str) -> None:
    message = refusal(helm, value)
    assert "values don't meet the specifications of the schema" in message, message
    assert said in message, message


@pytest.mark.parametrize(
    ("sets", "said"),
    [
        (("singleNamespaceInstall=true",), "also set lifecycle.hostLossFailover.enabled=false"),
        (("leaderElectionEnabled=false",), "set replicas=1 or leaderElectionEnabled=true"),
    ],
)
def test_contradicting_values_are_refused_with_the_fix(
    helm: Helm, sets: tuple[str, ...], said: str
) -> None:
    assert said in refusal(helm, *sets)


def test_the_generated_chart_files_are_current(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deploy/generate.py writes the chart's CRDs, values, schema, rule templates and
    Chart.yaml from the code; the README's values table from the schema."""
    monkeypatch.syspath_prepend(str(DEPLOY))
    script = runpy.run_path(str(DEPLOY / "generate.py"))
    script["chart"].__globals__["HERE"] = tmp_path
    script["chart"]()
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    # Chart.yaml, values.yaml, its schema and the rules template, then one file per CRD.
    assert len(written) == 4 + len(script["CHART_CRDS"]), written
    for relative in written:
        assert (DEPLOY / relative).read_text() == (tmp_path / relative).read_text(), (
            f"deploy/{relative} is stale: run .venv/bin/python deploy/generate.py"
        )
    readme = (CHART / "README.md").read_text()
    assert helm_chart.with_values_table(readme) == readme, (
        "the chart README's values table is stale: run .venv/bin/python deploy/generate.py"
    )


def test_the_values_table_lists_every_value_of_the_schema() -> None:
    def paths(schema: Obj, prefix: str = "") -> list[str]:
        out: list[str] = []
        for key, sub in schema["properties"].items():
            if "properties" in sub:
                out += paths(sub, f"{prefix}{key}.")
            else:
                out.append(f"{prefix}{key}")
        return out

    table = helm_chart.values_table()
    listed = [line.split("`")[1] for line in table.splitlines()[2:]]
    every = paths(helm_chart.schema())
    # A row is a value of the schema, or an object value whose keys the schema also names
    # (resources, probes): every key of the schema is in a row.
    assert all(any(p == row or p.startswith(f"{row}.") for p in every) for row in listed)
    assert all(any(p == row or p.startswith(f"{row}.") for row in listed) for p in every)
