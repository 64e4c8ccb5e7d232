"""`raycluster-operator plan`: what the operator would do to a cluster, without a cluster.

It runs the same pure ``plan_cluster`` the controller runs, on a RayCluster file and an
optional file of pods, so a user can see before applying which slices would be created,
which pods deleted and why, and what the status would say.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

import click
import yaml

from kubefacts.names import random_suffix
from kubefacts.timestamps import parse_time
from raycluster_operator.api.models import RayCluster
from raycluster_operator.api.objects import Resource
from raycluster_operator.api.problems import Problem
from raycluster_operator.api.validation import parse_cluster
from raycluster_operator.planning import (
    ClusterState,
    PlanContext,
    PlanOptions,
    Writes,
    plan_cluster,
)
from raycluster_operator.planning.features.slice_scaling import slice_scaling_gaps
from raycluster_operator.planning.features.unsupported import MEANINGS, unsupported_fields
from raycluster_operator.planning.spec_check import check_spec


@click.command(name="plan")
@click.option(
    "-f",
    "--filename",
    "cluster_file",
    required=True,
    type=click.File("r"),
    help="RayCluster manifest (YAML or JSON); '-' reads stdin.",
)
@click.option(
    "--pods",
    "pods_file",
    type=click.File("r"),
    help="Existing pods: a PodList or a multi-document stream of pods.",
)
@click.option(
    "--services",
    "services_file",
    type=click.File("r"),
    help="Existing services: a List or a multi-document stream.",
)
@click.option(
    "-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed for new replica name suffixes."
)
@click.option(
    "--now",
    "now_text",
    help="Time to plan at (RFC 3339), for reproducible status timestamps; default: now.",
)
@click.option(
    "--multi-host-indexing/--no-multi-host-indexing",
    default=True,
    show_default=True,
    help="Feature gate RayMultiHostIndexing.",
)
@click.option(
    "--random-pod-delete",
    is_flag=True,
    help="Act as with ENABLE_RANDOM_POD_DELETE=true (scale down even with autoscaling).",
)
def plan(
    cluster_file: TextIO,
    pods_file: TextIO | None,
    services_file: TextIO | None,
    output: str,
    seed: int,
    now_text: str | None,
    multi_host_indexing: bool,
    random_pod_delete: bool,
) -> None:
    """Print what the operator would do for a RayCluster (exit 2 if the spec is invalid)."""
    try:
        documents = [d for d in yaml.safe_load_all(cluster_file) if d is not None]
    except yaml.YAMLError as err:
        raise click.ClickException(f"cannot read the RayCluster file: {err}") from err
    if len(documents) != 1:
        raise click.ClickException(f"expected one RayCluster, found {len(documents)} documents")
    cluster, problems = parse_cluster(documents[0])
    if cluster is not None:
        problems = [*problems, *check_spec(cluster).problems]
    if cluster is None or problems:
        _fail(problems)
    assert cluster is not None
    if not cluster.metadata.namespace:
        cluster.metadata.namespace = "default"
    pods = _objects(pods_file, "Pod", cluster.metadata.namespace)
    services = _objects(services_file, "Service", cluster.metadata.namespace)
    # No nodes are given, so host loss (rule 8a) is off: a file cannot say a node is lost.
    options = PlanOptions(
        multi_host_indexing=multi_host_indexing,
        random_pod_delete=random_pod_delete,
        unready_slice_timeout=0,
    )
    state = ClusterState(documents[0], pods, services)
    result = plan_cluster(
        cluster, PlanContext(state, _parse_now(now_text), _suffixes(seed), options)
    )
    _print(output, result, cluster)


def _print(output: str, result: Writes, cluster: RayCluster) -> None:
    """The plan, then what the operator warns about whether or not the file's status shows
    it warned already: rule 7b's gaps and rule 3a's fields are said on every run, not once
    per change as their Events are."""
    gaps = slice_scaling_gaps(cluster)
    unsupported = unsupported_fields(cluster)
    if output == "json":
        body = plan_as_json(result)
        if gaps:
            body["sliceReservations"] = gaps
        if unsupported:
            body["unsupportedFields"] = {f"spec.{p}": MEANINGS[p] for p in unsupported}
        click.echo(json.dumps(body, indent=2, sort_keys=True))
        return
    lines = [render_table(result)]
    if gaps:
        lines += ["Slice reservations:", *(f"  Warning: {gap}" for gap in gaps)]
    if unsupported:
        lines += [
            "Fields the operator does not act on (the cluster runs without them):",
            *(f"  Warning: spec.{p}: {MEANINGS[p]}" for p in unsupported),
        ]
    click.echo("\n".join(lines))


def _fail(problems: Iterable[Problem]) -> None:
    click.echo("The RayCluster is invalid; the operator would not act on it:", err=True)
    for problem in problems:
        click.echo(f"  {problem}", err=True)
    sys.exit(2)


def _parse_now(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        return parse_time(text)
    except ValueError as err:
        raise click.BadParameter(f"not an RFC 3339 time: {text!r}", param_hint="--now") from err


def _suffixes(seed: int) -> Callable[[], str]:
    """KubeRay's replica-name suffixes (5 of its 27 letters/digits), reproducible by seed."""
    rng = random.Random(seed)
    return lambda: random_suffix(rng.choice)


def _objects(stream: TextIO | None, kind: str, namespace: str) -> list[dict[str, Any]]:
    """Objects of ``kind`` from a List (``items``) or a multi-document stream."""
    if stream is None:
        return []
    try:
        documents = [d for d in yaml.safe_load_all(stream) if d is not None]
    except yaml.YAMLError as err:
        raise click.ClickException(f"cannot read the {kind} file: {err}") from err
    out: list[dict[str, Any]] = []
    for doc in documents:
        if not isinstance(doc, Mapping):
            raise click.ClickException(f"every document of the {kind} file must be an object")
        items = doc.get("items") if "items" in doc else [doc]
        for item in items or ():
            if not isinstance(item, Mapping) or item.get("kind", kind) != kind:
                continue
            obj = dict(item)
            metadata = dict(Resource(obj).meta)
            metadata.setdefault("namespace", namespace)
            obj["metadata"] = metadata
            out.append(obj)
    return out


def plan_as_json(result: Writes) -> dict[str, Any]:
    out = _plan_body(result)
    # Crash-loop backoff (docs/design.md §4 rule 13a): only when it has something to say.
    if result.annotations:
        out["annotations"] = result.annotations
    if result.requeue_after is not None:
        out["requeueAfter"] = result.requeue_after
    return out


def _plan_body(result: Writes) -> dict[str, Any]:
    return {
        "creates": [
            {
                "group": c.group,
                "replicaIndex": c.replica_index,
                "replicaName": c.replica_name,
                "hostIndex": c.host_index,
                "reason": c.reason.value,
                "manifest": c.manifest,
            }
            for c in result.creates
        ],
        "deletes": [
            {
                "name": d.name,
                "group": d.group,
                "replicaName": d.replica_name,
                "replicaIndex": d.replica_index,
                "hostIndex": d.host_index,
                "reason": d.reason.value,
                "message": d.message,
            }
            for d in result.deletes
        ],
        "services": list(result.services),
        "missingServices": list(result.missing_services),
        "extraObjects": list(result.extra_objects),
        "events": [
            {"type": e.type, "reason": e.reason, "message": e.message, "regarding": e.regarding}
            for e in result.events
        ],
        "status": result.status,
        "problems": [{"path": p.path, "message": p.message} for p in result.problems],
    }


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def render_table(result: Writes) -> str:
    rows = [("ACTION", "GROUP", "REPLICA", "INDEX", "HOST", "POD", "REASON")]
    for c in result.creates:
        generate = Resource(c.manifest).generate_name
        rows.append(
            (
                "create",
                c.group,
                _cell(c.replica_name),
                _cell(c.replica_index),
                _cell(c.host_index),
                f"{generate}*" if generate else "-",
                c.reason.value,
            )
        )
    for d in result.deletes:
        rows.append(
            (
                "delete",
                d.group,
                _cell(d.replica_name),
                _cell(d.replica_index),
                _cell(d.host_index),
                d.name,
                d.reason.value,
            )
        )
    for name in result.missing_services:
        rows.append(("create", "-", "-", "-", "-", f"service/{name}", "ServiceMissing"))
    lines: list[str] = []
    if len(rows) == 1:
        lines.append("Nothing to do: the cluster matches its spec.")
    else:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines += [
            "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in rows
        ]
    lines.append("")
    lines += _status_summary(result.status or {})
    return "\n".join(lines)


def _status_summary(status: Mapping[str, Any]) -> list[str]:
    lines = [
        f"State: {status.get('state') or '-'}",
        f"Worker pods: desired {status.get('desiredWorkerReplicas', 0)}, "
        f"ready {status.get('readyWorkerReplicas', 0)} "
        f"(min {status.get('minWorkerReplicas', 0)}, max {status.get('maxWorkerReplicas', 0)})",
        f"Worker slices: desired {status.get('desiredWorkerSlices', 0)}, "
        f"ready {status.get('readyWorkerSlices', 0)}",
        f"Resources: cpu {status.get('desiredCPU')}, memory {status.get('desiredMemory')}, "
        f"gpu {status.get('desiredGPU')}, tpu {status.get('desiredTPU')}",
    ]
    for group in status.get("workerGroups") or ():
        lines.append(
            f"  group {group['groupName']}: {group['numOfHosts']} hosts/slice, slices "
            f"{group['readySlices']}/{group['desiredSlices']} ready, "
            f"{group['brokenSlices']} broken, "
            f"pods {group['readyPods']}/{group['desiredPods']} ready"
        )
    lines.append("Conditions:")
    for condition in status.get("conditions") or ():
        message = f" - {condition['message']}" if condition.get("message") else ""
        lines.append(
            f"  {condition['type']}={condition['status']} ({condition['reason']}){message}"
        )
    return lines
