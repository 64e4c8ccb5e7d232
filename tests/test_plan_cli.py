"""`raycluster-operator plan`: the planner from the command line, on the shipped examples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from raycluster_operator.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOW = "2026-11-29T19:00:00Z"


def run(*args: str) -> Any:
    return CliRunner().invoke(main, ["plan", *args, "--now", NOW])


def as_running(manifest: dict[str, Any], serial: int) -> dict[str, Any]:
    pod = json.loads(json.dumps(manifest))
    pod["metadata"]["name"] = f"{pod['metadata']['generateName']}{serial:05d}"
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return pod


def pods_with_a_failed_host(tmp_path: Path, label: str, value: str) -> list[dict[str, Any]]:
    """The TPU example's planned pods, running, but the first with ``label=value`` failed;
    written to ``tmp_path/pods.yaml``."""
    plan = json.loads(run("-f", str(EXAMPLES / "tpu-v6e-4x4.yaml"), "-o", "json").output)
    pods = [as_running(c["manifest"], i) for i, c in enumerate(plan["creates"])]
    victim = next(p for p in pods if p["metadata"]["labels"].get(label) == value)
    victim["status"]["phase"] = "Failed"
    (tmp_path / "pods.yaml").write_text(yaml.safe_dump_all(pods))
    return pods


def test_table_lists_the_head_and_every_host_of_both_tpu_slices() -> None:
    result = run("-f", str(EXAMPLES / "tpu-v6e-4x4.yaml"))
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines() if line.startswith("create")]
    workers = [r for r in rows if r[1] == "tpu-v6e-4x4"]
    assert [(r[3], r[4]) for r in workers] == [(str(i), str(h)) for i in (0, 1) for h in range(4)]
    assert len({r[2] for r in workers}) == 2
    assert any(r[1] == "headgroup" for r in rows)
    assert "Worker slices: desired 2, ready 0" in result.output
    assert "tpu 32" in result.output


def test_json_carries_manifests_and_status() -> None:
    result = run("-f", str(EXAMPLES / "gb200-nvl-18.yaml"), "-o", "json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    workers = [c for c in plan["creates"] if c["group"] == "nvl72"]
    assert sorted(c["hostIndex"] for c in workers) == list(range(18))
    labels = workers[0]["manifest"]["metadata"]["labels"]
    assert labels["ray.io/replica-host-index"] == str(workers[0]["hostIndex"])
    assert plan["status"]["desiredWorkerReplicas"] == 18
    assert plan["status"]["desiredGPU"] == "72"


def test_same_seed_same_plan_and_a_converged_cluster_plans_nothing(tmp_path: Path) -> None:
    first = run("-f", str(EXAMPLES / "cpu.yaml"), "-o", "json", "--seed", "7")
    assert first.output == run("-f", str(EXAMPLES / "cpu.yaml"), "-o", "json", "--seed", "7").output
    plan = json.loads(first.output)
    pods = [as_running(c["manifest"], i) for i, c in enumerate(plan["creates"])]
    (tmp_path / "pods.yaml").write_text(yaml.safe_dump({"kind": "PodList", "items": pods}))
    (tmp_path / "svc.yaml").write_text(yaml.safe_dump_all(plan["services"]))
    result = run(
        "-f",
        str(EXAMPLES / "cpu.yaml"),
        "--pods",
        str(tmp_path / "pods.yaml"),
        "--services",
        str(tmp_path / "svc.yaml"),
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Nothing to do")
    assert "State: ready" in result.output


def test_pods_as_a_multi_document_stream_and_a_failed_host(tmp_path: Path) -> None:
    pods_with_a_failed_host(tmp_path, "ray.io/replica-host-index", "2")
    result = run("-f", str(EXAMPLES / "tpu-v6e-4x4.yaml"), "--pods", str(tmp_path / "pods.yaml"))
    assert result.exit_code == 0, result.output
    deletes = [line.split() for line in result.output.splitlines() if line.startswith("delete")]
    assert len(deletes) == 4 and {d[-1] for d in deletes} == {"HostFailed"}
    assert "RayClusterReplicaFailure=True (HostFailed)" in result.output


def test_an_invalid_spec_exits_2_listing_every_problem(tmp_path: Path) -> None:
    obj = yaml.safe_load((EXAMPLES / "tpu-v6e-4x4.yaml").read_text())
    obj["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 3
    obj["spec"]["workerGroupSpecs"][0]["replicas"] = -1
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(obj))
    result = run("-f", str(path))
    assert result.exit_code == 2
    assert "spec.workerGroupSpecs[0].replicas" in result.output
    assert "spec.workerGroupSpecs[0]" in result.output and "numOfHosts" in result.output
    assert "create" not in result.output


def test_a_failed_host_shows_the_backoff_record_the_operator_would_write(tmp_path: Path) -> None:
    """The first break is counted in the RayCluster's annotation (docs/design.md §4 rule 13a):
    `plan -o json` shows the patch; a second break of the same template sets a 10 s wait."""
    pods = pods_with_a_failed_host(tmp_path, "ray.io/worker-group-replica-index", "1")
    first = json.loads(
        run(
            "-f",
            str(EXAMPLES / "tpu-v6e-4x4.yaml"),
            "--pods",
            str(tmp_path / "pods.yaml"),
            "-o",
            "json",
        ).output
    )
    (text,) = first["annotations"].values()
    record = json.loads(text)["tpu-v6e-4x4"]["1"]
    assert record["failures"] == 1 and record["nextTry"].startswith("2026-11-29T19:00:00")
    # The same slice index breaks again (another slice name) with the record stored.
    obj = yaml.safe_load((EXAMPLES / "tpu-v6e-4x4.yaml").read_text())
    obj["metadata"].setdefault("annotations", {}).update(first["annotations"])
    for pod in pods:
        if pod["metadata"]["labels"].get("ray.io/worker-group-replica-index") == "1":
            pod["metadata"]["labels"]["ray.io/worker-group-replica-name"] += "x"
    (tmp_path / "again.yaml").write_text(yaml.safe_dump(obj))
    (tmp_path / "pods.yaml").write_text(yaml.safe_dump_all(pods))
    second = json.loads(
        run(
            "-f", str(tmp_path / "again.yaml"), "--pods", str(tmp_path / "pods.yaml"), "-o", "json"
        ).output
    )
    (text,) = second["annotations"].values()
    assert json.loads(text)["tpu-v6e-4x4"]["1"]["failures"] == 2
    assert second["requeueAfter"] == 10.0
    assert any(e["reason"] == "SliceBackoff" for e in second["events"])


def test_fields_the_operator_does_not_act_on_are_warned_about(tmp_path: Path) -> None:
    """Rule 3a: the plan names them in both outputs, and still plans the cluster."""
    manifest = yaml.safe_load((EXAMPLES / "tpu-v6e-4x4.yaml").read_text())
    manifest["spec"]["authOptions"] = {"mode": "token"}
    manifest["spec"]["tlsOptions"] = {"enabled": True}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(manifest))
    table = run("-f", str(path))
    assert table.exit_code == 0, table.output
    assert any(line.startswith("create") for line in table.output.splitlines())
    assert "Fields the operator does not act on (the cluster runs without them):" in table.output
    assert (
        "  Warning: spec.authOptions: Ray token authentication is not configured by this "
        "operator; the cluster runs without it" in table.output
    )
    body = json.loads(run("-f", str(path), "-o", "json").output)
    assert list(body["unsupportedFields"]) == ["spec.authOptions", "spec.tlsOptions"]
    assert [e["reason"] for e in body["events"]].count("UnsupportedField") == 1


def test_a_type_error_and_a_bad_value_are_listed_together(tmp_path: Path) -> None:
    """issue 38 item 4: `plan` stopped at the type error and hid numOfHosts -1."""
    obj = yaml.safe_load((EXAMPLES / "tpu-v6e-4x4.yaml").read_text())
    obj["spec"]["workerGroupSpecs"][0]["maxReplicas"] = "x"
    obj["spec"]["workerGroupSpecs"][0]["numOfHosts"] = -1
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(obj))
    result = run("-f", str(path))
    assert result.exit_code == 2
    assert "spec.workerGroupSpecs[0].maxReplicas: must be an integer" in result.output
    assert "spec.workerGroupSpecs[0].numOfHosts: must be at least 1" in result.output
