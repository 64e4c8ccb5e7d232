"""The Job controller: runs a batch/v1 Job's pods to completion, as kube-controller-manager's.

Reduced to what `kubectl create job`, `kubectl wait --for=condition=complete`, `kubectl logs
job/NAME` and a RayJob's submitter need (docs/design.md §8, "Jobs"):

- pods come from the template with generateName `<job>-`, a controller ownerReference to the
  Job (GC deletes them with it) and the labels the server put in the template
  (`batch.kubernetes.io/job-name`, `job-name`, `controller-uid`,
  `batch.kubernetes.io/controller-uid`);
- at most `min(parallelism, completions - succeeded)` active pods; with `completions` unset (a
  work queue) the first success ends the Job once no pod is active; `completionMode: Indexed`
  gives each pod an index (`jobindexes.py`) and completes when every index has succeeded;
- failures (`jobfailures.py`): a Failed pod counts, and so does a pod deleted before it
  succeeded (unless podReplacementPolicy Failed or a podFailurePolicy wait for its Failed
  phase), but not a pod this controller deleted itself on suspend; a podFailurePolicy's rules
  can ignore a failure or fail the Job (`PodFailurePolicy`); more than `backoffLimit` fails
  the Job (`BackoffLimitExceeded`), as do container restarts under OnFailure reaching it;
- a failed pod is replaced after kube's backoff: 10 s doubled per failure since the last
  success, at most 10 min (the `backoff` knob, kube's DefaultJobPodFailureBackOff and
  MaxJobPodFailureBackOff);
- `activeDeadlineSeconds` from `status.startTime` fails it with `DeadlineExceeded`;
- ending is two-step as in kube 1.31+: `SuccessCriteriaMet` or `FailureTarget` first (active
  pods are deleted), then `Complete` (with `completionTime`) or `Failed` once none is left;
- `suspend: true` deletes the active pods and sets `Suspended`; resuming sets it False
  (`JobResumed`) and resets `startTime`;
- `ttlSecondsAfterFinished` deletes a finished Job (background propagation) after that many
  seconds from the time its terminal condition was set.

Each pod is counted once: kube holds a finalizer on each pod until it is counted; here the
controller remembers the pods it counted (per Job, in memory, seeded from the pods present
when it first sees a Job that has counts), so a pod deleted and gone is not counted twice, and
status counts never go down.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from devkube.controllers.jobfailures import (
    DEFAULT_BACKOFF,
    Backoff,
    is_failed,
    match_policy,
    only_replace_failed,
)
from devkube.controllers.jobfailures import finished_at as pod_finished_at
from devkube.controllers.jobindexes import (
    index_of,
    indexes_text,
    parse_indexes,
    pending,
    with_index,
)
from devkube.controllers.workloads import (
    EXPECTATION_TTL,
    PassLoop,
    controller_uid,
    meta,
    pod_is_ready,
    uid,
)
from devkube.machinery.client import ApiClient, ApiError, resource_path
from devkube.machinery.informer import Informer
from kubefacts.objects import Obj
from kubefacts.timestamps import parse_time, rfc3339

log = logging.getLogger(__name__)

BATCH = "batch/v1"
PATH = resource_path(BATCH, "jobs")
TERMINAL = ("Complete", "Failed")


def owner_reference(job: Obj) -> dict[str, Any]:
    return {
        "apiVersion": BATCH,
        "kind": "Job",
        "name": meta(job)["name"],
        "uid": uid(job),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_from_template(job: Obj) -> dict[str, Any]:
    template = (job.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    pod_meta: dict[str, Any] = {
        "generateName": f"{meta(job)['name']}-",
        "namespace": meta(job).get("namespace"),
        "labels": dict(tmeta.get("labels") or {}),
        "ownerReferences": [owner_reference(job)],
    }
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template.get("spec")}


def condition(job: Obj, kind: str) -> Obj | None:
    for entry in (job.get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind and entry.get("status") == "True":
            return dict(entry)
    return None


def finished_at(job: Obj) -> datetime | None:
    """When the Job reached Complete or Failed (None: it has not)."""
    for kind in TERMINAL:
        found = condition(job, kind)
        if found is not None:
            try:
                return parse_time(str(found.get("lastTransitionTime") or ""))
            except ValueError:
                return datetime.now(UTC)
    return None


def _with_condition(
    conditions: list[dict[str, Any]], kind: str, status: str, reason: str, message: str, now: str
) -> list[dict[str, Any]]:
    old = next((c for c in conditions if c.get("type") == kind), None)
    if old is not None and old.get("status") == status and old.get("reason") == reason:
        return conditions
    entry = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }
    return [*(c for c in conditions if c.get("type") != kind), entry]


def _restarts(pod: Obj) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount") or 0) for s in statuses)


@dataclass
class _Tracking:
    """What the controller counted of one Job's pods (uid -> how), and its failure backoff."""

    counted: dict[str, str] = field(default_factory=dict)
    backoff: Backoff = field(default_factory=Backoff)


@dataclass
class _Seen:
    """The pods of one pass not counted before, and what the pod failure policy said."""

    succeeded: list[Obj] = field(default_factory=list)
    failed: list[Obj] = field(default_factory=list)
    ignored: list[Obj] = field(default_factory=list)
    fail_job: str | None = None

    def marks(self) -> dict[str, str]:
        return {
            **{uid(p): "ignored" for p in self.ignored},
            **{uid(p): "failed" for p in self.failed},
            **{uid(p): "succeeded" for p in self.succeeded},
        }


class JobController:
    def __init__(
        self,
        client: ApiClient,
        *,
        pods: Informer,
        jobs: Informer | None = None,
        concurrency: int = 8,
        backoff: tuple[float, float] = DEFAULT_BACKOFF,
    ) -> None:
        """`backoff`: (first delay, longest delay) in seconds before a failed pod is replaced,
        kube's DefaultJobPodFailureBackOff and MaxJobPodFailureBackOff (10 s, 10 min), which
        kube's own integration tests shorten the same way."""
        self._client = client
        self.pods = pods
        self.jobs = jobs or Informer(client, PATH)
        self._backoff = backoff
        self._writes = asyncio.Semaphore(concurrency)
        # Pods created (by job uid) that the cache may not show yet: name -> (deadline, index).
        self._created: dict[str, dict[str, tuple[float, int | None]]] = {}
        self._tracking: dict[str, _Tracking] = {}
        self._loop = PassLoop("devcluster jobs", [self.jobs, pods], self.sync, resync=1.0)

    async def start(self) -> None:
        await self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def sync(self) -> None:
        jobs = list(self.jobs.cache.values())
        if not jobs and not self._created and not self._tracking:
            return
        owned: dict[str, list[Obj]] = {}
        for pod in list(self.pods.cache.values()):
            owner = controller_uid(pod)
            if owner is not None:
                owned.setdefault(owner, []).append(pod)
        live = {uid(j) for j in jobs}
        self._created = {k: v for k, v in self._created.items() if k in live}
        self._tracking = {k: v for k, v in self._tracking.items() if k in live}
        await asyncio.gather(*(self._sync_one(job, owned.get(uid(job), [])) for job in jobs))

    def _track(self, job: Obj, pods: list[Obj]) -> _Tracking:
        """The Job's record; a Job first seen with counts (a restarted controller) takes the
        finished pods present as counted already."""
        found = self._tracking.get(uid(job))
        if found is None:
            status = job.get("status") or {}
            found = _Tracking()
            if status.get("succeeded") or status.get("failed") or status.get("completedIndexes"):
                found.counted = {uid(p): "seeded" for p in pods if not _is_active(p)}
            self._tracking[uid(job)] = found
        return found

    async def _sync_one(self, job: Obj, pods: list[Obj]) -> None:
        if meta(job).get("deletionTimestamp"):
            return
        now = datetime.now(UTC)
        done = finished_at(job)
        if done is not None:
            self._tracking.pop(uid(job), None)
            await self._expire(job, done, now)
            return
        spec = job.get("spec") or {}
        track = self._track(job, pods)
        active = [p for p in pods if _is_active(p)]
        expect = self._pending(job, pods)
        status = dict(job.get("status") or {})
        failing = condition(job, "FailureTarget") is not None
        seen = _new_finished(spec, pods, track, failing)
        counts = _counts(job, pods, seen)
        backoff = track.backoff.update(
            [pod_finished_at(p, now) for p in seen.succeeded],
            [pod_finished_at(p, now) for p in [*seen.failed, *seen.ignored]],
        )
        marks = seen.marks()
        if spec.get("suspend"):
            marks |= {uid(p): "released" for p in active}
            await self._delete_all(active)
            new_status = _suspended(status, counts, now)
        else:
            start = status.get("startTime") or rfc3339(now)
            resumed = _is_suspended(job)
            if resumed:
                start = rfc3339(now)
            verdict = _verdict(job, spec, counts, seen.fail_job, start, now, pods)
            if verdict is None:
                await self._fill(job, spec, counts, active, expect, backoff, now, pods)
            elif active:
                await self._delete_all(active)
            new_status = _status(status, counts, active, start, verdict, now, resumed)
        if await self._write(job, new_status):
            track.counted |= marks
            track.backoff = backoff

    async def _fill(
        self,
        job: Obj,
        spec: Obj,
        counts: dict[str, Any],
        active: list[Obj],
        expect: dict[str, tuple[float, int | None]],
        backoff: Backoff,
        now: datetime,
        pods: list[Obj],
    ) -> None:
        """Create the pods the Job lacks, once the failure backoff has passed."""
        replacing = only_replace_failed(spec)
        terminating = [p for p in pods if meta(p).get("deletionTimestamp") and _phase_live(p)]
        waiting = len(terminating) if replacing else 0
        wanted = _wanted_active(spec, counts["succeeded"]) - len(active) - len(expect) - waiting
        if wanted <= 0:
            return
        if backoff.remaining(now, *self._backoff) > 0:
            return  # a later pass (one a second at least) creates them
        if spec.get("completionMode") != "Indexed":
            await asyncio.gather(*(self._create(job, None) for _ in range(wanted)))
            return
        taken = set(counts["indexes"]) | {i for _, i in expect.values() if i is not None}
        taken |= {
            i for p in (terminating if replacing else []) + active if (i := index_of(p)) is not None
        }
        indexes = pending(wanted, int(spec.get("completions") or 0), taken)
        await asyncio.gather(*(self._create(job, i) for i in indexes))

    def _pending(self, job: Obj, pods: list[Obj]) -> dict[str, tuple[float, int | None]]:
        loop_now = asyncio.get_running_loop().time()
        names = {str(meta(p).get("name")) for p in pods}
        expect = self._created.setdefault(uid(job), {})
        for name in [n for n, (t, _) in expect.items() if n in names or t < loop_now]:
            del expect[name]
        return expect

    async def _create(self, job: Obj, index: int | None) -> None:
        namespace = str(meta(job).get("namespace"))
        body = pod_from_template(job)
        if index is not None:
            body = with_index(body, str(meta(job)["name"]), index)
        try:
            async with self._writes:
                created = await self._client.create(resource_path("v1", "pods", namespace), body)
        except ApiError as error:
            log.warning("job %s/%s: creating a pod: %s", namespace, meta(job)["name"], error)
            self._loop.poke()
            return
        deadline = asyncio.get_running_loop().time() + EXPECTATION_TTL
        self._created.setdefault(uid(job), {})[str(meta(created)["name"])] = (deadline, index)

    async def _delete_all(self, pods: list[Obj]) -> None:
        async def one(pod: Obj) -> None:
            path = resource_path("v1", "pods", meta(pod).get("namespace"), meta(pod)["name"])
            try:
                async with self._writes:
                    await self._client.delete(path, uid=uid(pod))
            except ApiError as error:
                if error.status not in (404, 409):
                    log.warning("deleting %s: %s", path, error)

        await asyncio.gather(*(one(p) for p in pods if not meta(p).get("deletionTimestamp")))

    async def _expire(self, job: Obj, done: datetime, now: datetime) -> None:
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        if ttl is None or (now - done).total_seconds() < int(ttl):
            return
        path = resource_path(BATCH, "jobs", meta(job).get("namespace"), meta(job)["name"])
        try:
            async with self._writes:
                await self._client.delete(path, uid=uid(job), propagation_policy="Background")
        except ApiError as error:
            if error.status not in (404, 409):
                log.warning("deleting finished %s: %s", path, error)

    async def _write(self, job: Obj, status: dict[str, Any]) -> bool:
        """Whether the Job's status now says `status` (unchanged counts as written)."""
        if status == (job.get("status") or {}):
            return True
        path = resource_path(BATCH, "jobs", meta(job).get("namespace"), meta(job)["name"], "status")
        body = {"metadata": {"resourceVersion": meta(job).get("resourceVersion")}}
        # A merge patch: a field the new status drops is written as null.
        dropped = {k: None for k in (job.get("status") or {}) if k not in status}
        try:
            async with self._writes:
                await self._client.patch(path, {**body, "status": {**dropped, **status}})
        except ApiError as error:
            if error.status not in (404, 409):
                log.warning("status of %s: %s", path, error)
            self._loop.poke()
            return False
        return True


def _is_active(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not meta(pod).get("deletionTimestamp")


def _is_suspended(job: Obj) -> bool:
    return condition(job, "Suspended") is not None


def _new_finished(spec: Obj, pods: list[Obj], track: _Tracking, failing: bool) -> _Seen:
    """The pods that finished since they were last counted. Once the Job is failing, a pod
    deleted before it succeeded is failed whatever the replacement policy (kube counts every
    unfinished pod of a failed Job)."""
    seen = _Seen()
    indexed = spec.get("completionMode") == "Indexed"
    completions = int(spec.get("completions") or 0)
    policy = spec.get("podFailurePolicy")
    for pod in pods:
        if uid(pod) in track.counted:
            continue
        valid = not indexed or ((i := index_of(pod)) is not None and i < completions)
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            (seen.succeeded if valid else seen.ignored).append(pod)
            continue
        gone = failing and bool(meta(pod).get("deletionTimestamp"))
        if not (is_failed(pod, spec) or gone):
            continue
        if not valid:
            seen.ignored.append(pod)
            continue
        found = match_policy(policy, pod)
        (seen.failed if found.counts else seen.ignored).append(pod)
        if found.fail_job and seen.fail_job is None:
            seen.fail_job = found.fail_job
    return seen


def _counts(job: Obj, pods: list[Obj], seen: _Seen) -> dict[str, Any]:
    """Succeeded (for Indexed: the completed indexes) and failed so far, ready and terminating."""
    status = job.get("status") or {}
    indexes: set[int] = set()
    if (job.get("spec") or {}).get("completionMode") == "Indexed":
        indexes = parse_indexes(str(status.get("completedIndexes") or ""))
        indexes |= {i for p in seen.succeeded if (i := index_of(p)) is not None}
        succeeded = len(indexes)
    else:
        succeeded = int(status.get("succeeded") or 0) + len(seen.succeeded)
    return {
        "succeeded": succeeded,
        "indexes": indexes,
        "failed": int(status.get("failed") or 0) + len(seen.failed),
        "ready": sum(1 for p in pods if _is_active(p) and pod_is_ready(p)),
        "terminating": sum(1 for p in pods if meta(p).get("deletionTimestamp") and _phase_live(p)),
    }


def _phase_live(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _wanted_active(spec: Obj, succeeded: int) -> int:
    parallelism = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
    completions = spec.get("completions")
    if completions is None:
        return 0 if succeeded else parallelism
    return max(0, min(parallelism, int(completions) - succeeded))


def _past_backoff_on_failure(spec: Obj, pods: list[Obj]) -> bool:
    """kube's ``pastBackoffLimitOnFailure``: under OnFailure, container restarts of running and
    pending pods reaching backoffLimit (any restart when it is 0)."""
    template = (spec.get("template") or {}).get("spec") or {}
    if template.get("restartPolicy") != "OnFailure":
        return False
    restarts = sum(
        _restarts(p) for p in pods if (p.get("status") or {}).get("phase") in ("Running", "Pending")
    )
    limit = int(spec.get("backoffLimit", 6) if spec.get("backoffLimit") is not None else 6)
    return restarts > 0 if limit == 0 else restarts >= limit


def _verdict(
    job: Obj,
    spec: Obj,
    counts: dict[str, Any],
    fail_job: str | None,
    start: str,
    now: datetime,
    pods: list[Obj],
) -> tuple[str, str, str] | None:
    """(interim condition, reason, message) once the Job has succeeded or failed, in kube's
    order: an interim condition already set, a FailJob rule, the backoff limit, the deadline."""
    for kind in ("SuccessCriteriaMet", "FailureTarget"):
        found = condition(job, kind)
        if found is not None:
            return (kind, str(found.get("reason") or ""), str(found.get("message") or ""))
    if fail_job is not None:
        return ("FailureTarget", "PodFailurePolicy", fail_job)
    completions = spec.get("completions")
    succeeded = counts["succeeded"]
    if (completions is None and succeeded > 0) or (
        completions is not None and succeeded >= int(completions)
    ):
        return (
            "SuccessCriteriaMet",
            "CompletionsReached",
            "Reached expected number of succeeded pods",
        )
    backoff = int(spec.get("backoffLimit", 6) if spec.get("backoffLimit") is not None else 6)
    if counts["failed"] > backoff or _past_backoff_on_failure(spec, pods):
        return (
            "FailureTarget",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        )
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (now - parse_time(start)).total_seconds() >= int(deadline):
        return (
            "FailureTarget",
            "DeadlineExceeded",
            "Job was active longer than specified deadline",
        )
    return None


def _status(
    old: dict[str, Any],
    counts: dict[str, Any],
    active: list[Obj],
    start: str,
    verdict: tuple[str, str, str] | None,
    now: datetime,
    resumed: bool,
) -> dict[str, Any]:
    stamp = rfc3339(now)
    conditions = list(old.get("conditions") or [])
    if resumed:
        conditions = _with_condition(
            conditions, "Suspended", "False", "JobResumed", "Job resumed", stamp
        )
    status: dict[str, Any] = {
        **{k: v for k, v in old.items() if k not in ("active", "ready", "terminating")},
        "startTime": start,
        "succeeded": counts["succeeded"] or None,
        "failed": counts["failed"] or None,
        "ready": counts["ready"],
        "terminating": counts["terminating"],
        "uncountedTerminatedPods": {},
    }
    if "completedIndexes" in old or counts["indexes"]:
        status["completedIndexes"] = indexes_text(counts["indexes"])
    if active:
        status["active"] = len(active)
    if verdict is not None:
        interim, reason, message = verdict
        conditions = _with_condition(conditions, interim, "True", reason, message, stamp)
        if not active and not counts["terminating"]:
            final = "Complete" if interim == "SuccessCriteriaMet" else "Failed"
            conditions = _with_condition(conditions, final, "True", reason, message, stamp)
            if final == "Complete":
                status["completionTime"] = stamp
    if conditions:
        status["conditions"] = conditions
    return {k: v for k, v in status.items() if v is not None}


def _suspended(old: dict[str, Any], counts: dict[str, Any], now: datetime) -> dict[str, Any]:
    stamp = rfc3339(now)
    conditions = _with_condition(
        list(old.get("conditions") or []),
        "Suspended",
        "True",
        "JobSuspended",
        "Job suspended",
        stamp,
    )
    status = {
        k: v for k, v in old.items() if k not in ("active", "ready", "startTime", "conditions")
    }
    status.update(
        conditions=conditions,
        ready=0,
        terminating=counts["terminating"],
        succeeded=counts["succeeded"] or None,
        failed=counts["failed"] or None,
    )
    return {k: v for k, v in status.items() if v is not None}
