"""The Job controller: runs a batch/v1 Job's pods to completion, as kube-controller-manager's.

Reduced to what `kubectl create job`, `kubectl wait --for=condition=complete`, `kubectl logs
job/NAME` and a RayJob's submitter need (docs/design.md §8, "Jobs"):

- pods come from the template with generateName `<job>-`, a controller ownerReference to the
  Job (GC deletes them with it) and the labels the server put in the template
  (`batch.kubernetes.io/job-name`, `job-name`, `controller-uid`,
  `batch.kubernetes.io/controller-uid`);
- NonIndexed completions: at most `min(parallelism, completions - succeeded)` active pods; with
  `completions` unset (a work queue) the first success ends the Job once no pod is active;
- failures: every Failed pod counts, and under restartPolicy OnFailure every container restart
  of an active pod; more than `backoffLimit` fails the Job (`BackoffLimitExceeded`);
- `activeDeadlineSeconds` from `status.startTime` fails it with `DeadlineExceeded`;
- ending is two-step as in kube 1.31+: `SuccessCriteriaMet` or `FailureTarget` first (active
  pods are deleted), then `Complete` (with `completionTime`) or `Failed` once none is left;
- `suspend: true` deletes the active pods and sets `Suspended`; resuming resets `startTime`;
- `ttlSecondsAfterFinished` deletes a finished Job (background propagation) after that many
  seconds from the time its terminal condition was set.

Counts are kept in status and never go down, so deleting a finished pod does not undo a
success or a failure (kube tracks this with a finalizer on each pod; we keep the counts).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

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


class JobController:
    def __init__(
        self,
        client: ApiClient,
        *,
        pods: Informer,
        jobs: Informer | None = None,
        concurrency: int = 8,
    ) -> None:
        self._client = client
        self.pods = pods
        self.jobs = jobs or Informer(client, PATH)
        self._writes = asyncio.Semaphore(concurrency)
        # Pods created (by job uid) that the cache may not show yet: name -> loop deadline.
        self._created: dict[str, dict[str, float]] = {}
        self._loop = PassLoop("devcluster jobs", [self.jobs, pods], self.sync, resync=1.0)

    async def start(self) -> None:
        await self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def sync(self) -> None:
        jobs = list(self.jobs.cache.values())
        if not jobs and not self._created:
            return
        owned: dict[str, list[Obj]] = {}
        for pod in list(self.pods.cache.values()):
            owner = controller_uid(pod)
            if owner is not None:
                owned.setdefault(owner, []).append(pod)
        live = {uid(j) for j in jobs}
        self._created = {k: v for k, v in self._created.items() if k in live}
        await asyncio.gather(*(self._sync_one(job, owned.get(uid(job), [])) for job in jobs))

    async def _sync_one(self, job: Obj, pods: list[Obj]) -> None:
        if meta(job).get("deletionTimestamp"):
            return
        now = datetime.now(UTC)
        done = finished_at(job)
        if done is not None:
            await self._expire(job, done, now)
            return
        spec = job.get("spec") or {}
        active = [p for p in pods if _is_active(p)]
        expect = self._pending(job, pods)
        status = dict(job.get("status") or {})
        counts = _counts(job, pods)
        if spec.get("suspend"):
            await self._delete_all(active)
            await self._write(job, _suspended(status, counts, active, now))
            return
        start = status.get("startTime") or rfc3339(now)
        verdict = _verdict(spec, counts, start, now)
        if verdict is None and not any(condition(job, k) for k in ("SuccessCriteriaMet",)):
            wanted = _wanted_active(spec, counts["succeeded"]) - len(active) - len(expect)
            if wanted > 0:
                await asyncio.gather(*(self._create(job) for _ in range(wanted)))
        elif active:
            await self._delete_all(active)
        await self._write(job, _status(status, counts, active, start, verdict, now))

    def _pending(self, job: Obj, pods: list[Obj]) -> dict[str, float]:
        loop_now = asyncio.get_running_loop().time()
        names = {str(meta(p).get("name")) for p in pods}
        expect = self._created.setdefault(uid(job), {})
        for name in [n for n, t in expect.items() if n in names or t < loop_now]:
            del expect[name]
        return expect

    async def _create(self, job: Obj) -> None:
        namespace = str(meta(job).get("namespace"))
        try:
            async with self._writes:
                created = await self._client.create(
                    resource_path("v1", "pods", namespace), pod_from_template(job)
                )
        except ApiError as error:
            log.warning("job %s/%s: creating a pod: %s", namespace, meta(job)["name"], error)
            self._loop.poke()
            return
        deadline = asyncio.get_running_loop().time() + EXPECTATION_TTL
        self._created.setdefault(uid(job), {})[str(meta(created)["name"])] = deadline

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

    async def _write(self, job: Obj, status: dict[str, Any]) -> None:
        if status == (job.get("status") or {}):
            return
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


def _is_active(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not meta(pod).get("deletionTimestamp")


def _counts(job: Obj, pods: list[Obj]) -> dict[str, int]:
    """Succeeded and failed so far (never fewer than status says), ready and terminating."""
    status = job.get("status") or {}
    spec = job.get("spec") or {}
    on_failure = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    failed = phases.count("Failed")
    if on_failure == "OnFailure":
        failed += sum(_restarts(p) for p in pods if _is_active(p))
    return {
        "succeeded": max(phases.count("Succeeded"), int(status.get("succeeded") or 0)),
        "failed": max(failed, int(status.get("failed") or 0)),
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


def _verdict(
    spec: Obj, counts: dict[str, int], start: str, now: datetime
) -> tuple[str, str, str] | None:
    """(interim condition, reason, message) once the Job has succeeded or failed."""
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
    if counts["failed"] > backoff:
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
    counts: dict[str, int],
    active: list[Obj],
    start: str,
    verdict: tuple[str, str, str] | None,
    now: datetime,
) -> dict[str, Any]:
    stamp = rfc3339(now)
    conditions = [c for c in old.get("conditions") or [] if c.get("type") != "Suspended"]
    status: dict[str, Any] = {
        **{k: v for k, v in old.items() if k not in ("active", "ready", "terminating")},
        "startTime": start,
        "succeeded": counts["succeeded"] or None,
        "failed": counts["failed"] or None,
        "ready": counts["ready"],
        "terminating": counts["terminating"],
        "uncountedTerminatedPods": {},
    }
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


def _suspended(
    old: dict[str, Any], counts: dict[str, int], active: list[Obj], now: datetime
) -> dict[str, Any]:
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
    status.update(conditions=conditions, ready=0, terminating=counts["terminating"])
    return status
