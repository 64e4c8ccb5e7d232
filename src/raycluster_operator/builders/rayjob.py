"""What a RayJob creates: its RayCluster, its submitter Job, the `ray job submit` line and the
Jobs API request body (docs/design.md §11). Pure: names and ids come in as arguments.

Shapes follow KubeRay's (``rayjob_controller.go``, ``common/job.go``): the cluster carries the
RayJob's labels plus ``ray.io/originated-from-cr-name`` / ``-crd``, and a controller
ownerReference to the RayJob (so deleting the RayJob takes it); the submitter Job is named
after the RayJob, backoffLimit ``submitterConfig.backoffLimit`` (2 by default), its pod from
``submitterPodTemplate`` or one container of the head's image with restartPolicy Never; its
command waits for the dashboard, submits only when the submission id is unknown (trying again
on a refused connection), then follows the logs, so a retried submitter pod never submits
twice.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Mapping
from typing import Any

import yaml

from raycluster_operator.api import labels
from raycluster_operator.api.objects import Obj

RAYJOB_API_VERSION = "ray.io/v1"
DASHBOARD_PORT = 8265
#: KubeRay's default submitter Job backoffLimit.
SUBMITTER_BACKOFF_LIMIT = 2
SUBMITTER_CONTAINER = "ray-job-submitter"
CREATED_BY_VALUE = "raycluster-operator"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value: Mapping[str, Any] = obj.get("metadata") or {}
    return value


def owner_reference(rayjob: Mapping[str, Any]) -> Obj:
    return {
        "apiVersion": RAYJOB_API_VERSION,
        "kind": "RayJob",
        "name": _meta(rayjob)["name"],
        "uid": _meta(rayjob).get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def origin_labels(rayjob: Mapping[str, Any]) -> dict[str, str]:
    return {
        labels.ORIGINATED_FROM_CR_NAME: str(_meta(rayjob)["name"]),
        labels.ORIGINATED_FROM_CRD: "RayJob",
    }


def ray_cluster(rayjob: Mapping[str, Any], name: str) -> Obj:
    """The RayCluster of one attempt: rayClusterSpec as given, our multi-host features with it."""
    spec = copy.deepcopy((rayjob.get("spec") or {}).get("rayClusterSpec") or {})
    meta = _meta(rayjob)
    cluster_labels = {**(meta.get("labels") or {}), **origin_labels(rayjob)}
    return {
        "apiVersion": RAYJOB_API_VERSION,
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "labels": cluster_labels,
            # Not kubectl's record of the RayJob's manifest: it would read as the cluster's.
            "annotations": {
                k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED
            },
            "ownerReferences": [owner_reference(rayjob)],
        },
        "spec": spec,
    }


def dashboard_port(cluster_spec: Mapping[str, Any]) -> int:
    """The head container's port named ``dashboard``, else 8265 (KubeRay's rule)."""
    template = (cluster_spec.get("headGroupSpec") or {}).get("template") or {}
    containers = (template.get("spec") or {}).get("containers") or [{}]
    for port in containers[0].get("ports") or []:
        if port.get("name") == "dashboard" and port.get("containerPort"):
            return int(port["containerPort"])
    return DASHBOARD_PORT


def dashboard_url(namespace: str, head_service: str, port: int) -> str:
    """``host:port`` of the dashboard through the head service, as KubeRay writes it."""
    return f"{head_service}.{namespace}.svc.cluster.local:{port}"


def runtime_env(rayjob: Mapping[str, Any]) -> dict[str, Any] | None:
    text = (rayjob.get("spec") or {}).get("runtimeEnvYAML") or ""
    if not text.strip():
        return None
    loaded = yaml.safe_load(text)
    if not isinstance(loaded, dict):
        raise ValueError("runtimeEnvYAML is not a mapping")
    return loaded


def _number(value: Any) -> str:
    return f"{float(value):f}"


def submit_command(rayjob: Mapping[str, Any], address: str, job_id: str) -> str:
    """The shell line of the submitter container (KubeRay's, in substance)."""
    spec = rayjob.get("spec") or {}
    url = address if address.startswith("http") else f"http://{address}"
    quoted = shlex.quote(url)
    submit = ["ray", "job", "submit", "--address", quoted, "--no-wait"]
    env = runtime_env(rayjob)
    if env:
        submit += ["--runtime-env-json", shlex.quote(json.dumps(env, sort_keys=True))]
    if spec.get("metadata"):
        submit += ["--metadata-json", shlex.quote(json.dumps(spec["metadata"], sort_keys=True))]
    submit += ["--submission-id", shlex.quote(job_id)]
    if spec.get("entrypointNumCpus"):
        submit += ["--entrypoint-num-cpus", _number(spec["entrypointNumCpus"])]
    if spec.get("entrypointNumGpus"):
        submit += ["--entrypoint-num-gpus", _number(spec["entrypointNumGpus"])]
    if spec.get("entrypointResources"):
        submit += ["--entrypoint-resources", shlex.quote(str(spec["entrypointResources"]))]
    submit += ["--", str(spec.get("entrypoint") or "").strip()]
    health = f"{url}/api/gcs_healthz"
    wait = (
        "until python -c "
        + shlex.quote(f"import urllib.request; urllib.request.urlopen({health!r}, timeout=2)")
        + f" >/dev/null 2>&1; do echo 'Waiting for the Ray dashboard at {url} ...'; "
        "sleep 2; done"
    )
    status = f"ray job status --address {quoted} {shlex.quote(job_id)} >/dev/null 2>&1"
    follow = f"ray job logs --address {quoted} --follow {shlex.quote(job_id)}"
    # Submitted unless the id is known already; a refused connection (the dashboard is up but
    # still starting its modules) is tried again before the pod fails.
    submit_once = f"if {status} || {' '.join(submit)}; then break; fi; sleep 3"
    return f"{wait}; for attempt in 1 2 3 4 5; do {submit_once}; done; {follow}"


def _default_submitter_pod(cluster_spec: Mapping[str, Any]) -> Obj:
    head = ((cluster_spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    containers = head.get("containers") or [{}]
    container: Obj = {
        "name": SUBMITTER_CONTAINER,
        "image": containers[0].get("image", "rayproject/ray"),
        "resources": {
            "limits": {"cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "500m", "memory": "200Mi"},
        },
    }
    return {"spec": {"restartPolicy": "Never", "containers": [container]}}


def submitter_job(
    rayjob: Mapping[str, Any], cluster_spec: Mapping[str, Any], address: str, job_id: str
) -> Obj:
    """The batch/v1 Job whose pod runs `ray job submit` against the head's dashboard."""
    spec = rayjob.get("spec") or {}
    template: Obj = copy.deepcopy(spec.get("submitterPodTemplate") or {}) or (
        _default_submitter_pod(cluster_spec)
    )
    pod_spec = template.setdefault("spec", {})
    pod_spec.setdefault("restartPolicy", "Never")
    container = (pod_spec.get("containers") or [{}])[0]
    if not container.get("command"):
        container["command"] = ["/bin/bash", "-ce", "--"]
        container["args"] = [submit_command(rayjob, address, job_id)]
    env = list(container.get("env") or [])
    env += [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "RAY_DASHBOARD_ADDRESS", "value": address},
        {"name": "RAY_JOB_SUBMISSION_ID", "value": job_id},
    ]
    container["env"] = env
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {
        **(tmeta.get("labels") or {}),
        **origin_labels(rayjob),
        labels.CREATED_BY: CREATED_BY_VALUE,
    }
    backoff = (spec.get("submitterConfig") or {}).get("backoffLimit")
    meta = _meta(rayjob)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "labels": {**origin_labels(rayjob), labels.CREATED_BY: CREATED_BY_VALUE},
            "ownerReferences": [owner_reference(rayjob)],
        },
        "spec": {
            "backoffLimit": SUBMITTER_BACKOFF_LIMIT if backoff is None else int(backoff),
            "template": template,
        },
    }


def submitter_job_id(job: Mapping[str, Any]) -> str | None:
    """The submission id a submitter Job was built for (its ``RAY_JOB_SUBMISSION_ID``), or
    None when it carries none: a submitter left from an earlier attempt is told apart by it.
    Read as the container sees it: in the first container (the one ``submitter_job`` writes),
    the last of the name (after any the user's template set), as the kubelet resolves it."""
    template = (job.get("spec") or {}).get("template") or {}
    containers = (template.get("spec") or {}).get("containers") or [{}]
    found = None
    for var in containers[0].get("env") or []:
        if var.get("name") == "RAY_JOB_SUBMISSION_ID" and "value" in var:
            found = str(var["value"])
    return found


def submit_request(rayjob: Mapping[str, Any], job_id: str) -> Obj:
    """The body of ``POST /api/jobs/`` (HTTPMode)."""
    spec = rayjob.get("spec") or {}
    body: Obj = {"entrypoint": str(spec.get("entrypoint") or "").strip(), "submission_id": job_id}
    env = runtime_env(rayjob)
    if env:
        body["runtime_env"] = env
    if spec.get("metadata"):
        body["metadata"] = dict(spec["metadata"])
    if spec.get("entrypointNumCpus"):
        body["entrypoint_num_cpus"] = float(spec["entrypointNumCpus"])
    if spec.get("entrypointNumGpus"):
        body["entrypoint_num_gpus"] = float(spec["entrypointNumGpus"])
    if spec.get("entrypointResources"):
        body["entrypoint_resources"] = json.loads(str(spec["entrypointResources"]))
    return body
