"""One pass for one RayJob: from what was observed to the writes, the status and the Events
(docs/design.md §11). Pure: the clock, the random suffix and the Jobs API's answer come in.

At most one move of ``states.TRANSITIONS`` per pass, as KubeRay's switch makes it; a pass that
moves asks to run again at once, one that waits asks to run again after ``poll``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import yaml

from kubefacts.timestamps import parse_time, rfc3339
from raycluster_operator.api import names
from raycluster_operator.builders import rayjob as build
from raycluster_operator.planning.rayjob.deletion import plan_deletion
from raycluster_operator.planning.rayjob.model import (
    Action,
    ActionKind,
    Context,
    Event,
    JobsApi,
    Observed,
    Plan,
)
from raycluster_operator.planning.rayjob.slices import find_breaks, slices_ready
from raycluster_operator.planning.rayjob.states import (
    FAILED_REASON,
    NOT_RETRIED,
    TERMINAL,
    TERMINAL_JOB,
    Cause,
    DeploymentStatus,
    JobStatus,
    check_transition,
)

_S = DeploymentStatus
CLUSTER_SELECTOR_KEY = "ray.io/cluster"
MODES = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")
#: Modes whose submitter's end (a Job's, or the head's submitter container's) ends the job.
SUBMITTER_MODES = ("K8sJobMode", "SidecarMode")
SLICE_FAILURES_KEPT = 10


def needs_jobs_api(rayjob: Mapping[str, Any]) -> bool:
    """Whether this pass reads the Jobs API (only a Running job is asked about)."""
    status = rayjob.get("status") or {}
    return status.get("jobDeploymentStatus") == _S.RUNNING and bool(status.get("jobId"))


def plan_rayjob(observed: Observed, ctx: Context) -> Plan:
    status = copy.deepcopy(dict(observed.rayjob.get("status") or {}))
    plan = Plan(status=status)
    state = _S(status.get("jobDeploymentStatus") or "")
    step = _STEPS[state]
    step(observed, ctx, plan)
    _mirror_cluster(observed, plan)
    if plan.moves:
        _after_move(observed, ctx, plan)
    gen = (observed.rayjob.get("metadata") or {}).get("generation")
    if gen is not None:
        plan.status["observedGeneration"] = gen
    return plan


# -- helpers ---------------------------------------------------------------------------------


def _spec(observed: Observed) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = observed.rayjob.get("spec") or {}
    return spec


def _move(plan: Plan, target: DeploymentStatus, cause: Cause, note: str) -> None:
    source = _S(plan.status.get("jobDeploymentStatus") or "")
    move = check_transition(source, target, cause)
    plan.moves.append(move)
    plan.status["jobDeploymentStatus"] = target.value
    failing = target in (_S.FAILED, _S.VALIDATION_FAILED) or cause in (
        Cause.SUSPEND,
        Cause.SLICE_RESUBMIT,
    )
    kind = "Warning" if failing else "Normal"
    shown = f"{source.value or 'New'} -> {target.value or 'New'}: {note}"
    plan.events.append(Event(kind, cause.value, shown))
    if cause in FAILED_REASON:
        plan.status["reason"] = FAILED_REASON[cause]
        plan.status["message"] = note


def _after_move(observed: Observed, ctx: Context, plan: Plan) -> None:
    """End times, the attempt counters and the retry rule (KubeRay's
    checkBackoffLimitAndUpdateStatusIfNeeded), once per move."""
    plan.requeue_after = 0.0
    target = _S(plan.status.get("jobDeploymentStatus") or "")
    cause = plan.moves[-1].cause
    if target in TERMINAL:
        plan.status["endTime"] = rfc3339(ctx.now)
    if target == _S.COMPLETE and plan.status.get("jobStatus") == JobStatus.SUCCEEDED:
        plan.status["succeeded"] = int(plan.status.get("succeeded") or 0) + 1
    counts_failure = target == _S.FAILED or cause == Cause.SLICE_RESUBMIT
    if counts_failure:
        plan.status["failed"] = int(plan.status.get("failed") or 0) + 1
    plan.status.setdefault("succeeded", int(plan.status.get("succeeded") or 0))
    plan.status.setdefault("failed", int(plan.status.get("failed") or 0))
    limit = int(_spec(observed).get("backoffLimit") or 0)
    if target == _S.FAILED and cause not in NOT_RETRIED and plan.status["failed"] < limit + 1:
        note = f"attempt {plan.status['failed']} of {limit + 1} failed; retrying on a new cluster"
        _move(plan, _S.RETRYING, Cause.RETRY, note)
        plan.status.pop("endTime", None)


_ACTIVE = "activeDeadlineSeconds"
_PRE_RUNNING = "preRunningDeadlineSeconds"
#: §11, 11f: a deadline's spec field (seconds from ``startTime``) -> the cause it fails with
#: and how the failure is told.
_DEADLINES = {
    _ACTIVE: (Cause.DEADLINE_EXCEEDED, "the RayJob has passed its activeDeadlineSeconds ({} s)"),
    _PRE_RUNNING: (
        Cause.PRE_RUNNING_DEADLINE_EXCEEDED,
        "the job did not run within preRunningDeadlineSeconds ({} s)",
    ),
}


def _deadline(observed: Observed, ctx: Context, plan: Plan, *fields: str) -> bool:
    """Whether one of the deadlines ``fields`` has passed; the first that has fails the job."""
    start = plan.status.get("startTime")
    for field_name in fields:
        deadline = _spec(observed).get(field_name)
        if deadline is None or not start:
            continue
        if ctx.now < parse_time(str(start)) + timedelta(seconds=int(deadline)):
            continue
        cause, note = _DEADLINES[field_name]
        _move(plan, _S.FAILED, cause, note.format(int(deadline)))
        return True
    return False


def _mirror_cluster(observed: Observed, plan: Plan) -> None:
    state = plan.status.get("jobDeploymentStatus") or ""
    if observed.cluster is not None and state not in (_S.SUSPENDED, _S.NEW, _S.RETRYING):
        cluster_status = observed.cluster.get("status")
        if cluster_status:
            plan.status["rayClusterStatus"] = copy.deepcopy(cluster_status)


def invalid_spec(spec: Mapping[str, Any]) -> str:
    """Why the spec cannot run ("" when it can): KubeRay's validateRayJob, in substance."""
    mode = spec.get("submissionMode") or "K8sJobMode"
    if mode not in MODES:
        return f"unknown submissionMode {mode!r}"
    if mode == "SidecarMode":
        problem = _sidecar_problem(spec)
        if problem:
            return problem
    selector = spec.get("clusterSelector") or {}
    if not spec.get("rayClusterSpec") and not selector.get(CLUSTER_SELECTOR_KEY):
        return "one of rayClusterSpec or clusterSelector (ray.io/cluster) is required"
    if spec.get("rayClusterSpec") and selector:
        return "rayClusterSpec and clusterSelector cannot both be set"
    if mode != "InteractiveMode" and not str(spec.get("entrypoint") or "").strip():
        return "entrypoint is required"
    if spec.get("shutdownAfterJobFinishes") and selector:
        return "shutdownAfterJobFinishes cannot be used with clusterSelector"
    try:
        build.runtime_env({"spec": spec})
    except (ValueError, yaml.YAMLError) as error:
        return f"runtimeEnvYAML: {error}"
    return ""


def _sidecar_problem(spec: Mapping[str, Any]) -> str:
    """KubeRay v1.7's SidecarMode rules (``validateRayJobSpec``), in its words; and ours: a
    resubmission needs a submitter that can run again, which a head container cannot."""
    if spec.get("clusterSelector"):
        return "ClusterSelector is not supported in SidecarMode"
    if spec.get("submitterPodTemplate") is not None:
        return "Currently, SidecarMode doesn't support SubmitterPodTemplate"
    if spec.get("submitterConfig") is not None:
        return "Currently, SidecarMode doesn't support SubmitterConfig"
    head = ((spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template") or {}
    if (head.get("spec") or {}).get("restartPolicy") not in (None, "", "Never"):
        return "restartPolicy for head Pod should be Never or unset when using SidecarMode"
    if spec.get("sliceFailurePolicy") == "Resubmit":
        return (
            "sliceFailurePolicy Resubmit cannot be used with SidecarMode: the submitter is a "
            "container of the head pod and never runs twice"
        )
    return ""


def sidecar_outcome(heads: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """SidecarMode's submitter as KubeRay reads it (``checkSidecarContainerStatus``,
    ``getSubmitterContainerFinishedTime``): ("Complete" or "Failed", why) once the head's
    ``ray-job-submitter`` container has terminated (exit 0 or not); ("", "") while it runs;
    ("Failed", why) when no head pod is left (KubeRay: "Ray head pod not found.")."""
    live = [h for h in heads if not (h.get("metadata") or {}).get("deletionTimestamp")]
    if not live:
        return "Failed", "Ray head pod not found."
    for head in live:
        for status in (head.get("status") or {}).get("containerStatuses") or ():
            if status.get("name") != build.SUBMITTER_CONTAINER:
                continue
            ended = (status.get("state") or {}).get("terminated")
            if not ended:
                return "", ""
            code = int(ended.get("exitCode") or 0)
            if code == 0:
                return "Complete", ""
            return "Failed", (
                f"Ray head pod container {build.SUBMITTER_CONTAINER} terminated with exit code "
                f"{code}: {ended.get('reason') or ''}"
            )
    return "", ""


# -- the states ------------------------------------------------------------------------------


def _new(observed: Observed, ctx: Context, plan: Plan) -> None:
    spec = _spec(observed)
    problem = invalid_spec(spec)
    if problem:
        _move(plan, _S.VALIDATION_FAILED, Cause.INVALID_SPEC, problem)
        return
    name = str((observed.rayjob.get("metadata") or {}).get("name"))
    status = plan.status
    if spec.get("submissionMode") != "InteractiveMode" and not status.get("jobId"):
        status["jobId"] = spec.get("jobId") or names.fit(name, 57, suffix=f"-{ctx.suffix}")
    if not status.get("rayClusterName"):
        selected = (spec.get("clusterSelector") or {}).get(CLUSTER_SELECTOR_KEY)
        status["rayClusterName"] = selected or names.fit(name, 57, suffix=f"-{ctx.suffix}")
    status["jobStatus"] = status.get("jobStatus") or JobStatus.NEW.value
    status["startTime"] = rfc3339(ctx.now)
    job = status.get("jobId") or "(the user submits)"
    note = f"job {job} on RayCluster {status['rayClusterName']}"
    _move(plan, _S.INITIALIZING, Cause.INITIALIZED, note)


def _cluster_ready(cluster: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> bool:
    """Head and every worker slice ready (§11, 11c): our slice counts when the CRD keeps them,
    else KubeRay's pod counts; and the worker pods agree, because the status lags them (a
    slice that broke a moment ago still reads ready there)."""
    status = cluster.get("status") or {}
    if status.get("state") != "ready" or not slices_ready(status, pods):
        return False
    if "desiredWorkerSlices" in status:
        ready = int(status.get("readyWorkerSlices") or 0)
        return ready >= int(status.get("desiredWorkerSlices") or 0)
    ready = int(status.get("readyWorkerReplicas") or 0)
    return ready >= int(status.get("desiredWorkerReplicas") or 0)


def _initializing(observed: Observed, ctx: Context, plan: Plan) -> None:
    spec = _spec(observed)
    if spec.get("suspend"):
        _move(plan, _S.SUSPENDING, Cause.SUSPEND, "spec.suspend is true")
        return
    if _deadline(observed, ctx, plan, _ACTIVE, _PRE_RUNNING):
        return
    name = str(plan.status.get("rayClusterName"))
    plan.requeue_after = ctx.poll
    if observed.cluster is None:
        if spec.get("clusterSelector"):
            note = f"RayCluster {name} set in the clusterSelector is not found"
            plan.events.append(Event("Warning", "RayClusterNotFound", note))
            return
        manifest = build.ray_cluster(observed.rayjob, name, str(plan.status.get("jobId") or ""))
        plan.actions.append(Action(ActionKind.CREATE_CLUSTER, name, manifest))
        plan.events.append(Event("Normal", "CreatedRayCluster", f"Created RayCluster {name}"))
        return
    if not _cluster_ready(observed.cluster, observed.pods):
        return
    cluster_spec = observed.cluster.get("spec") or {}
    namespace = str((observed.rayjob.get("metadata") or {}).get("namespace"))
    port = build.dashboard_port(cluster_spec)
    url = build.dashboard_url(namespace, names.head_service_name(name), port)
    plan.status["dashboardURL"] = url
    mode = spec.get("submissionMode") or "K8sJobMode"
    if mode == "InteractiveMode":
        _move(plan, _S.WAITING, Cause.AWAIT_USER, "submit the job and set spec.jobId")
        return
    if mode == "K8sJobMode" and _foreign(observed.submitter, plan.status):
        # An earlier attempt's submitter (resubmitted, or deleted but still in the cache):
        # gone before this attempt's is created under the same name.
        plan.actions.append(Action(ActionKind.DELETE_SUBMITTER, _name(observed.submitter or {})))
        return
    if mode == "K8sJobMode" and observed.submitter is None:
        job = build.submitter_job(observed.rayjob, cluster_spec, url, str(plan.status["jobId"]))
        plan.actions.append(Action(ActionKind.CREATE_SUBMITTER, job["metadata"]["name"], job))
        note = f"Created Kubernetes Job {job['metadata']['name']}"
        plan.events.append(Event("Normal", "CreatedRayJobSubmitter", note))
    note = f"every slice of RayCluster {name} is ready; {mode} submits job {plan.status['jobId']}"
    _move(plan, _S.RUNNING, Cause.CLUSTER_READY, note)


def _waiting(observed: Observed, ctx: Context, plan: Plan) -> None:
    if _deadline(observed, ctx, plan, _PRE_RUNNING):
        return
    job_id = _spec(observed).get("jobId")
    if not job_id:
        plan.requeue_after = ctx.poll
        return
    plan.status["jobId"] = job_id
    _move(plan, _S.RUNNING, Cause.USER_SUBMITTED, f"following job {job_id}")


def _foreign(submitter: Mapping[str, Any] | None, status: Mapping[str, Any]) -> bool:
    """A submitter Job built for another submission id than this attempt's."""
    if submitter is None:
        return False
    built_for = build.submitter_job_id(submitter)
    return built_for is not None and built_for != status.get("jobId")


def _submitter_outcome(submitter: Mapping[str, Any] | None) -> str:
    """ "Complete", "Failed" or "" for the submitter Job."""
    for cond in (submitter or {}).get("status", {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return ""


def _running(observed: Observed, ctx: Context, plan: Plan) -> None:
    spec = _spec(observed)
    if spec.get("suspend"):
        _move(plan, _S.SUSPENDING, Cause.SUSPEND, "spec.suspend is true")
        return
    if _deadline(observed, ctx, plan, _ACTIVE) or _slice_policy(observed, ctx, plan):
        return
    plan.requeue_after = ctx.poll
    mode = spec.get("submissionMode") or "K8sJobMode"
    submitted_by_job = mode in SUBMITTER_MODES
    own = not _foreign(observed.submitter, plan.status)
    outcome = _submitter_outcome(observed.submitter) if mode == "K8sJobMode" and own else ""
    if mode == "SidecarMode":
        outcome, why = sidecar_outcome(observed.heads)
        if outcome == "Failed":  # checked first, as KubeRay does
            _sidecar_failed(observed, plan, why)
            return
    if observed.jobs_api == JobsApi.NOT_FOUND:
        if mode == "HTTPMode":
            body = build.submit_request(observed.rayjob, str(plan.status.get("jobId")))
            plan.actions.append(Action(ActionKind.SUBMIT, str(plan.status.get("jobId")), body))
        elif outcome:
            note = "the submitter finished but the Ray job is not found in the RayCluster"
            cause = Cause.SUBMISSION_FAILED if outcome == "Failed" else Cause.APP_FAILED
            _move(plan, _S.FAILED, cause, note)
        return
    if observed.jobs_api != JobsApi.FOUND:
        if outcome == "Failed":
            _move(plan, _S.FAILED, Cause.SUBMISSION_FAILED, "the submitter Job failed")
        return
    info = observed.job_info
    job_status = JobStatus(str(info.get("status") or ""))
    plan.status["jobStatus"] = job_status.value
    plan.status["message"] = str(info.get("message") or "")
    times = {}
    for key, field_name in (("start_time", "startTime"), ("end_time", "endTime")):
        if info.get(key):
            times[field_name] = rfc3339(
                datetime.fromtimestamp(int(info[key]) / 1000, ctx.now.tzinfo)
            )
    if times:
        plan.status["rayJobInfo"] = times
    if outcome == "Failed" and job_status not in TERMINAL_JOB:
        _move(plan, _S.FAILED, Cause.SUBMISSION_FAILED, "the submitter Job failed")
        return
    if job_status not in TERMINAL_JOB or (submitted_by_job and not outcome):
        return
    if job_status == JobStatus.STOPPED and _maybe_stopped_for_a_break(observed):
        return
    if job_status == JobStatus.FAILED:
        _move(plan, _S.FAILED, Cause.APP_FAILED, str(info.get("message") or "the Ray job failed"))
    else:
        _move(plan, _S.COMPLETE, Cause.JOB_ENDED, f"the Ray job is {job_status.value}")


def _maybe_stopped_for_a_break(observed: Observed) -> bool:
    """A STOPPED job under Resubmit or FailJob while a slice is not whole may be the one this
    operator stopped for a break before it crashed, with the move not yet written (§11, slice
    failure policy). The break shows once the slice's replacement exists (pods newer than the
    job's start); ending the job Complete before then lost the resubmission. Once every slice is
    whole again with no break found, STOPPED is the user's, and the job ends."""
    policy = _spec(observed).get("sliceFailurePolicy") or "LeaveToRay"
    if policy == "LeaveToRay" or observed.cluster is None:
        return False
    return not slices_ready(observed.cluster.get("status") or {}, observed.pods)


def _sidecar_failed(observed: Observed, plan: Plan, why: str) -> None:
    """The head's submitter exited non-zero, or the head is gone: the job failed. Its own
    failure (the Jobs API says FAILED, now or before) is AppFailed with Ray's message; else the
    submission failed, in the container's words (KubeRay's ``checkSidecarContainerStatus``)."""
    info = observed.job_info if observed.jobs_api == JobsApi.FOUND else {}
    if info.get("status"):
        plan.status["jobStatus"] = str(info["status"])
        plan.status["message"] = str(info.get("message") or "")
    if not observed.heads:
        _move(plan, _S.FAILED, Cause.APP_FAILED, why)
    elif plan.status.get("jobStatus") == JobStatus.FAILED.value:
        _move(plan, _S.FAILED, Cause.APP_FAILED, str(plan.status.get("message") or why))
    else:
        _move(plan, _S.FAILED, Cause.SUBMISSION_FAILED, why)


def _slice_policy(observed: Observed, ctx: Context, plan: Plan) -> bool:
    """EXTENSION (docs/design.md §11, slice failure policy): a slice that broke while the Ray
    job ran is recorded, then left to Ray, resubmitted or made the job's failure."""
    policy = _spec(observed).get("sliceFailurePolicy") or "LeaveToRay"
    started = (plan.status.get("rayJobInfo") or {}).get("startTime")
    recorded = list(plan.status.get("sliceFailures") or [])
    breaks = find_breaks(observed.pods, started, recorded)
    if not breaks:
        return False
    action = {"LeaveToRay": "LeftToRay", "Resubmit": "Resubmitted", "FailJob": "FailedJob"}[policy]
    stamp = rfc3339(ctx.now)
    for found in breaks:
        recorded.append({**found.record(), "action": action, "time": stamp})
        plan.events.append(Event("Warning", "SliceBroken", f"{found.describe()}; {action}"))
    plan.status["sliceFailures"] = recorded[-SLICE_FAILURES_KEPT:]
    plan.breaks.extend(breaks)
    first = breaks[0].describe()
    job_id = str(plan.status.get("jobId") or "")
    if policy == "LeaveToRay":
        return False
    if job_id:
        plan.actions.append(Action(ActionKind.STOP_JOB, job_id))
    if policy == "FailJob":
        _move(plan, _S.FAILED, Cause.SLICE_FAILED, first)
        return True
    limit = int(_spec(observed).get("backoffLimit") or 0)
    if int(plan.status.get("failed") or 0) + 1 >= limit + 1:
        _move(plan, _S.FAILED, Cause.SLICE_FAILED, f"{first}; no resubmission left (backoffLimit)")
        return True
    if observed.submitter is not None:
        plan.actions.append(Action(ActionKind.DELETE_SUBMITTER, _name(observed.submitter)))
    name = str((observed.rayjob.get("metadata") or {}).get("name"))
    plan.status["jobId"] = names.fit(name, 57, suffix=f"-{ctx.suffix}")
    for key in ("jobStatus", "rayJobInfo", "message", "dashboardURL"):
        plan.status.pop(key, None)
    plan.status["jobStatus"] = JobStatus.NEW.value
    _move(plan, _S.INITIALIZING, Cause.SLICE_RESUBMIT, f"{first}; resubmitting once healed")
    return True


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def _release(observed: Observed, plan: Plan, target: DeploymentStatus, why: str) -> None:
    """Suspending and Retrying: delete the attempt's cluster (never a selected one) and
    submitter, and move on once both are gone."""
    owned_cluster = not _spec(observed).get("clusterSelector")
    cluster_name = str(plan.status.get("rayClusterName") or "")
    pending = False
    if observed.cluster is not None and owned_cluster:
        plan.actions.append(Action(ActionKind.DELETE_CLUSTER, _name(observed.cluster)))
        pending = True
    elif owned_cluster and cluster_name:
        # Absent from the cache, yet maybe created a moment ago (its watch event not in):
        # deleted by name before the name is forgotten, so no attempt's cluster is leaked.
        plan.actions.append(Action(ActionKind.DELETE_CLUSTER, cluster_name))
    if observed.submitter is not None:
        plan.actions.append(Action(ActionKind.DELETE_SUBMITTER, _name(observed.submitter)))
        pending = True
    if pending:
        plan.requeue_after = 1.0
        return
    for key in (
        "rayClusterStatus",
        "rayClusterName",
        "dashboardURL",
        "jobId",
        "message",
        "reason",
        "rayJobInfo",
        "jobStatusCheckFailureStartTime",
        "endTime",
    ):
        plan.status.pop(key, None)
    plan.status["jobStatus"] = JobStatus.NEW.value
    _move(plan, target, Cause.RESOURCES_RELEASED, why)


def _suspending(observed: Observed, ctx: Context, plan: Plan) -> None:
    _release(observed, plan, _S.SUSPENDED, "the cluster and submitter are deleted")


def _retrying(observed: Observed, ctx: Context, plan: Plan) -> None:
    _release(observed, plan, _S.NEW, "the failed attempt's cluster is deleted")


def _suspended(observed: Observed, ctx: Context, plan: Plan) -> None:
    if not _spec(observed).get("suspend"):
        plan.status["jobStatus"] = JobStatus.NEW.value
        _move(plan, _S.NEW, Cause.RESUME, "spec.suspend is false")


def _finished(observed: Observed, ctx: Context, plan: Plan) -> None:
    plan_deletion(observed, ctx, plan)


def _validation_failed(observed: Observed, ctx: Context, plan: Plan) -> None:
    return None


_STEPS = {
    _S.NEW: _new,
    _S.INITIALIZING: _initializing,
    _S.WAITING: _waiting,
    _S.RUNNING: _running,
    _S.SUSPENDING: _suspending,
    _S.RETRYING: _retrying,
    _S.SUSPENDED: _suspended,
    _S.COMPLETE: _finished,
    _S.FAILED: _finished,
    _S.VALIDATION_FAILED: _validation_failed,
}
