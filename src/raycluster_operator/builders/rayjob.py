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

SidecarMode (KubeRay v1.7's ``createNewRayClusterInstance`` and ``getSubmitterContainer``):
no Job; the cluster's head template gets one more container, ``ray-job-submitter`` (the head's
image, KubeRay's default resources, ``PYTHONUNBUFFERED``, ``RAY_DASHBOARD_ADDRESS``,
``RAY_JOB_SUBMISSION_ID``), whose line waits for the dashboard on localhost (it shares the
head's network) and runs ``ray job submit`` against ``http://127.0.0.1:<dashboard port>``
without ``--no-wait``: it follows the job and exits 0 if it succeeded, 1 if not, so its exit
ends the job. The head pod's restartPolicy is Never (the submitter never runs twice) and the
cluster is annotated ``ray.io/disable-provisioned-head-restart``, as KubeRay does.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Mapping
from typing import Any

import yaml

from raycluster_operator.api import labels, names
from raycluster_operator.api.objects import Obj

RAYJOB_API_VERSION = "ray.io/v1"
DASHBOARD_PORT = 8265
#: KubeRay's default submitter Job backoffLimit.
SUBMITTER_BACKOFF_LIMIT = 2
SUBMITTER_CONTAINER = "ray-job-submitter"
SIDECAR_MODE = "SidecarMode"
#: KubeRay marks a SidecarMode RayJob's cluster so its head, once provisioned, is not recreated.
DISABLE_HEAD_RESTART = "ray.io/disable-provisioned-head-restart"
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


def ray_cluster(rayjob: Mapping[str, Any], name: str, job_id: str = "") -> Obj:
    """The RayCluster of one attempt: rayClusterSpec as given, our multi-host features with it;
    in SidecarMode its head carries the submitter of ``job_id``."""
    spec = copy.deepcopy((rayjob.get("spec") or {}).get("rayClusterSpec") or {})
    meta = _meta(rayjob)
    cluster_labels = {**(meta.get("labels") or {}), **origin_labels(rayjob)}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    if (rayjob.get("spec") or {}).get("submissionMode") == SIDECAR_MODE:
        head = spec.setdefault("headGroupSpec", {}).setdefault("template", {})
        pod = head.setdefault("spec", {})
        namespace = str(meta.get("namespace"))
        address = dashboard_url(namespace, names.head_service_name(name), dashboard_port(spec))
        submitter = sidecar_submitter(rayjob, spec, address, job_id)
        pod["containers"] = [*(pod.get("containers") or []), submitter]
        pod["restartPolicy"] = "Never"
        annotations[DISABLE_HEAD_RESTART] = "true"
    return {
        "apiVersion": RAYJOB_API_VERSION,
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "labels": cluster_labels,
            # Not kubectl's record of the RayJob's manifest: it would read as the cluster's.
            "annotations": annotations,
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


def _submit(rayjob: Mapping[str, Any], url: str, job_id: str, *, no_wait: bool) -> list[str]:
    """``ray job submit`` with the RayJob's options, as KubeRay orders them."""
    spec = rayjob.get("spec") or {}
    submit = ["ray", "job", "submit", "--address", shlex.quote(url)]
    if no_wait:
        submit.append("--no-wait")
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
    return submit


def _wait_for_dashboard(health: str, url: str) -> str:
    return (
        "until python -c "
        + shlex.quote(f"import urllib.request; urllib.request.urlopen({health!r}, timeout=2)")
        + f" >/dev/null 2>&1; do echo 'Waiting for the Ray dashboard at {url} ...'; "
        "sleep 2; done"
    )


def submit_command(rayjob: Mapping[str, Any], address: str, job_id: str) -> str:
    """The shell line of the submitter Job's container (KubeRay's, in substance)."""
    url = address if address.startswith("http") else f"http://{address}"
    quoted = shlex.quote(url)
    submit = _submit(rayjob, url, job_id, no_wait=True)
    wait = _wait_for_dashboard(f"{url}/api/gcs_healthz", url)
    status = f"ray job status --address {quoted} {shlex.quote(job_id)} >/dev/null 2>&1"
    follow = f"ray job logs --address {quoted} --follow {shlex.quote(job_id)}"
    # Submitted unless the id is known already; a refused connection (the dashboard is up but
    # still starting its modules) is tried again before the pod fails.
    submit_once = f"if {status} || {' '.join(submit)}; then break; fi; sleep 3"
    return f"{wait}; for attempt in 1 2 3 4 5; do {submit_once}; done; {follow}"


def sidecar_command(rayjob: Mapping[str, Any], port: int, job_id: str) -> str:
    """The submitter container's line in SidecarMode: the dashboard on localhost, then one
    blocking ``ray job submit`` (no status check: the container never runs twice) whose exit
    code is the job's outcome (0 succeeded, 1 not)."""
    url = f"http://127.0.0.1:{port}"
    wait = _wait_for_dashboard(f"http://localhost:{port}/api/gcs_healthz", url)
    return f"{wait}; {' '.join(_submit(rayjob, url, job_id, no_wait=False))}"


def _default_submitter_container(cluster_spec: Mapping[str, Any]) -> Obj:
    head = ((cluster_spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    containers = head.get("containers") or [{}]
    return {
        "name": SUBMITTER_CONTAINER,
        "image": containers[0].get("image", "rayproject/ray"),
        "resources": {
            "limits": {"cpu": "1", "memory": "1Gi"},
            "requests": {"cpu": "500m", "memory": "200Mi"},
        },
    }


def _submitter_env(address: str, job_id: str) -> list[Obj]:
    return [
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        {"name": "RAY_DASHBOARD_ADDRESS", "value": address},
        {"name": "RAY_JOB_SUBMISSION_ID", "value": job_id},
    ]


def sidecar_submitter(
    rayjob: Mapping[str, Any], cluster_spec: Mapping[str, Any], address: str, job_id: str
) -> Obj:
    """The ``ray-job-submitter`` container SidecarMode adds to the head pod."""
    container = _default_submitter_container(cluster_spec)
    container["command"] = ["/bin/bash", "-ce", "--"]
    container["args"] = [sidecar_command(rayjob, dashboard_port(cluster_spec), job_id)]
    container["env"] = _submitter_env(address, job_id)
    return container


def _default_submitter_pod(cluster_spec: Mapping[str, Any]) -> Obj:
    container = _default_submitter_container(cluster_spec)
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
    container["env"] = [*(container.get("env") or []), *_submitter_env(address, job_id)]
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
