"""One RayCluster, one pass: read the caches, ask planning what to do, do it, record it.

Every decision is ``planning.plan_pass``'s, from what the caches show (docs/design.md
§7). This module only executes a plan safely:

- it plans only when the cache shows every pod write of the previous pass (expectations), so
  a lagging informer never causes a double create or a repeated delete; objects created but
  not yet cached, and the status last written, are handed to planning as present;
- objects first, then deletes (with a uid precondition), then creates, all hosts of a slice
  at once through the bounded writer;
- every create and delete reaches a log line and a metric with its named reason, and the
  plan's Events are recorded after the writes;
- status is merge-patched through the status subresource only when it differs, so a
  converged cluster costs no writes; the spec is never written;
- a failed write makes the pass fail in the runtime's vocabulary (``runtime/reconcile.py``):
  ``ReconcileError`` (retried with backoff), or ``TerminalError`` when every failure is one
  retrying cannot fix (an ``Invalid`` or ``Forbidden`` answer), which is recorded as a
  Warning Event and waits for the next change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubefacts.names import random_suffix
from raycluster_operator.api.objects import Obj, Resource
from raycluster_operator.controller.raycluster.crdfit import InstalledCrd
from raycluster_operator.controller.raycluster.expectations import Expectations
from raycluster_operator.controller.raycluster.metrics import ClusterMetrics
from raycluster_operator.controller.raycluster.present import Present
from raycluster_operator.controller.raycluster.refusals import RefusalHolds
from raycluster_operator.controller.raycluster.sources import (
    BY_CLUSTER,
    BY_NAMESPACE,
    BY_OWNER,
    Caches,
    Change,
)
from raycluster_operator.controller.runtime.events import EventRecorder
from raycluster_operator.controller.runtime.reconcile import ReconcileError, Result, TerminalError
from raycluster_operator.controller.runtime.store import StoreView, split_key
from raycluster_operator.controller.runtime.writer import Writer
from raycluster_operator.kube import (
    COMPUTE_DOMAINS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    RAYCLUSTERS,
    AlreadyExists,
    Conflict,
    Forbidden,
    KubeClient,
    KubeError,
    NotFound,
    kind_of,
)
from raycluster_operator.planning import (
    IDLE_TERMINATION_FINALIZER,
    ClusterState,
    ObjectId,
    PassPlan,
    PlannedEvent,
    PlanOptions,
    PodCreate,
    PodDelete,
    object_id,
    plan_pass,
)
from raycluster_operator.planning.features.quota import (
    HOLD_KIND,
    LIMIT_RANGE_KIND,
    QUOTA_KIND,
    RACES,
    hold_object,
    refusal_reason,
    settle_creates,
)
from raycluster_operator.planning.reasons import DISRUPTION_REASONS, DeleteReason

log = logging.getLogger(__name__)

#: Deletions that move a slice for a planned disruption (metric ``slices_moved``).
MOVE_REASONS = DISRUPTION_REASONS | {DeleteReason.SLICE_EVICTED}

#: The Event recorded on a cluster when the API refused a write for good.
WRITE_REJECTED = "WriteRejected"


@dataclass(frozen=True)
class _Failure:
    what: str
    error: BaseException

    def __str__(self) -> str:
        return f"{self.what}: {self.error}"


class Reconciler:
    def __init__(
        self,
        client: KubeClient,
        caches: Caches,
        *,
        writer: Writer,
        recorder: EventRecorder,
        metrics: ClusterMetrics,
        options: PlanOptions | None = None,
        expectations_timeout: float = 120.0,
    ) -> None:
        self.client = client
        self.caches = caches
        self.writer = writer
        self.recorder = recorder
        self.metrics = metrics
        self.options = options or PlanOptions()
        #: Writes not yet seen in the caches; owned here, fed by ``observe``.
        self.expectations = Expectations(timeout=expectations_timeout)
        #: The installed CRD's schema: status is compared as the server will keep it.
        self.crd = InstalledCrd(client, recorder)
        #: Per cluster: the annotations last patched, and the resourceVersion they were
        #: planned from (shown instead of the cached ones until the cache moves past it).
        self._annotations: dict[str, tuple[str, dict[str, str | None]]] = {}
        #: Rule 13c: groups held after the API refused a pod of their slice.
        self.holds = RefusalHolds()

    def observe(self, change: Change) -> None:
        """A sighting from the sources: proves (or retracts) a write the pass waits for."""
        if not change.observed or change.kind == "RayCluster":
            return
        if change.kind == "Pod":
            self.expectations.observe(change.key, change.name, terminating_or_gone=change.gone)
        else:
            self.expectations.observe_object(change.key, (change.kind, change.name))

    async def reconcile(self, key: str) -> Result:
        obj = self.caches.clusters.get(key)
        if obj is None:
            self._forget(key)
            return Result()
        pods = self.caches.pods.by_index(BY_CLUSTER, key)
        cached = {p["metadata"]["name"]: bool(p["metadata"].get("deletionTimestamp")) for p in pods}
        if not self.expectations.satisfied(key, cached.get):
            return Result(requeue_after=self.expectations.remaining(key))
        obj = self._as_written(key, obj)
        obj = self._with_annotations(key, obj)
        now = datetime.now(UTC)
        state = ClusterState(
            cluster=obj,
            pods=pods,
            services=self.caches.services.by_index(BY_OWNER, key),
            present=self._present(key),
            nodes=self._nodes(pods),
            objects=self._objects(key, now),
        )
        plan = plan_pass(state, now=now, new_suffix=random_suffix, options=self.options)
        if plan.note:
            log.debug("reconcile %s: %s", key, plan.note)
        held = await self._execute(key, obj, plan, pods)
        due = [d for d in (plan.requeue_after, held) if d is not None]
        return Result(requeue_after=min(due) if due else None)

    # -- reading ---------------------------------------------------------------------------

    def _forget(self, key: str) -> None:
        self.expectations.forget(key)
        self.holds.forget(key)
        self.metrics.forget_cluster(*split_key(key))
        self._annotations.pop(key, None)

    def _as_written(self, key: str, obj: Obj) -> Obj:
        """The cached cluster, with the status we last wrote if the cache has not caught up."""
        written = self.expectations.written_status(key, _version(obj))
        return obj if written is None else {**obj, "status": written}

    def _nodes(self, pods: Sequence[Obj]) -> dict[str, Obj]:
        """Host loss: the cached Nodes the cluster's pods are bound to (none when not watched)."""
        cache = self.caches.nodes
        if cache is None:
            return {}
        out: dict[str, Obj] = {}
        for pod in pods:
            name = (pod.get("spec") or {}).get("nodeName")
            if name and name not in out and (node := cache.get(f"/{name}")) is not None:
                out[name] = node
        return out

    def _objects(self, key: str, now: datetime) -> dict[str, list[Any]]:
        """Other cached kinds the features plan from: the namespace's PodDisruptionBudgets
        (rule 12b: the cluster's per-slice ones, and a user's that may select its pods), its
        ComputeDomains, only when the cluster serves them (rule 13b; the key's absence says it
        does not), the namespace's quotas (rule 13c; absent when not watched), the groups held
        after a refused pod, and any other kind a feature watches."""
        caches = self.caches
        out: dict[str, list[Any]] = {}
        if caches.budgets is not None:
            namespace = split_key(key)[0]
            out[POD_DISRUPTION_BUDGETS.kind] = list(
                caches.budgets.by_index(BY_NAMESPACE, namespace)
            )
        if COMPUTE_DOMAINS.kind in caches.served and caches.domains is not None:
            out[COMPUTE_DOMAINS.kind] = caches.domains.by_index(BY_CLUSTER, key)
        quotas = caches.quotas
        found = quotas.in_namespace(split_key(key)[0]) if quotas is not None else None
        if quotas is not None and found is not None:
            out[QUOTA_KIND] = list(found)
            ranges = quotas.limit_ranges_in(split_key(key)[0])
            if ranges:
                out[LIMIT_RANGE_KIND] = list(ranges)  # the charge's defaults (rule 13c)
        for kind, view in caches.watched.items():
            out[kind] = list(view.by_index(BY_CLUSTER, key))
        holds = self.holds.active(key, now)
        if holds:
            out[HOLD_KIND] = [hold_object(g, h) for g, h in holds.items()]
        return out

    def _present(self, key: str) -> Present:
        """What of the cluster's wanted objects exists: looked up by name when the planner
        asks, so a pass costs what it asks for, not the size of the namespace (issue 26)."""
        caches = self.caches
        by_kind: dict[str, StoreView] = {"Service": caches.services, **caches.rbac}
        if caches.domains is not None:
            by_kind[COMPUTE_DOMAINS.kind] = caches.domains
        if caches.budgets is not None:
            by_kind[POD_DISRUPTION_BUDGETS.kind] = caches.budgets
        by_kind.update(caches.watched)
        return Present(split_key(key)[0], by_kind, self.expectations.vouched(key))

    # -- writing ---------------------------------------------------------------------------

    async def _execute(
        self, key: str, obj: Obj, plan: PassPlan, pods: Sequence[Obj]
    ) -> float | None:
        """Carry the plan out; answers when a group held by a refusal may try again."""
        failures: list[_Failure] = []
        held: float | None = None
        if plan.annotations:
            await self._patch_annotations(key, obj, plan.annotations, failures)
        if plan.objects:
            await self._create_objects(key, plan.objects, failures)
        if plan.deletes:
            await self._delete_pods(key, plan.deletes, pods, failures)
        if plan.creates:
            held = await self._create_pods(key, plan.creates, failures)
        if plan.object_deletes:
            await self._delete_objects(key, plan.object_deletes, failures)
        if plan.release_finalizer:
            await self._release_finalizer(key, plan.release_finalizer, failures)
        await self._record(obj, plan.events, pods)
        if plan.status is not None:
            await self._write_status(key, obj, plan.status, failures)
        if plan.tallies is not None:
            self.metrics.set_slices(*split_key(key), list(plan.tallies))
        if failures:
            await self._fail(obj, failures)
        return held

    async def _create_objects(
        self, key: str, objects: Sequence[Obj], failures: list[_Failure]
    ) -> None:
        ns, _ = split_key(key)
        results = await self.writer.run_all(
            self.client.create(kind_of(o), o, namespace=ns) for o in objects
        )
        made: list[ObjectId] = []
        for o, result in zip(objects, results, strict=True):
            kind, name = object_id(o)
            if isinstance(result, AlreadyExists) or not isinstance(result, BaseException):
                made.append((kind, name))
                if not isinstance(result, BaseException):
                    log.info("created %s %s/%s", kind, ns, name)
            else:
                failures.append(_Failure(f"create {kind} {name}", result))
        self.expectations.vouch(key, made)

    async def _delete_objects(
        self, key: str, objects: Sequence[ObjectId], failures: list[_Failure]
    ) -> None:
        """Objects no slice keeps: a slice's ComputeDomain once its pods are gone (rule 13b),
        budgets of gone or released slices (rule 12b). NotFound is done."""
        ns, _ = split_key(key)
        kinds = {
            COMPUTE_DOMAINS.kind: COMPUTE_DOMAINS,
            POD_DISRUPTION_BUDGETS.kind: POD_DISRUPTION_BUDGETS,
        }
        results = await self.writer.run_all(
            self.client.delete(kinds[kind], ns, name) for kind, name in objects
        )
        for (kind, name), result in zip(objects, results, strict=True):
            if isinstance(result, NotFound):
                continue
            if isinstance(result, BaseException):
                failures.append(_Failure(f"delete {kind} {name}", result))
            else:
                log.info("deleted %s %s/%s", kind, ns, name)

    async def _delete_pods(
        self, key: str, deletes: Sequence[PodDelete], pods: Sequence[Obj], failures: list[_Failure]
    ) -> None:
        ns, _ = split_key(key)
        uids = {p["metadata"]["name"]: p["metadata"].get("uid") for p in pods}
        self.expectations.expect(key, deletes=[d.name for d in deletes])
        moved: set[str | None] = set()
        results = await self.writer.run_all(
            self.client.delete(
                PODS,
                ns,
                d.name,
                uid=d.uid or uids.get(d.name),
                grace_period=d.grace_period_seconds,
            )
            for d in deletes
        )
        for d, result in zip(deletes, results, strict=True):
            if isinstance(result, BaseException):
                # NotFound/Conflict: already gone, or replaced by a namesake; nothing of ours
                # is left to delete, and no deletion will ever be observed.
                self.expectations.forget_names(key, deletes=[d.name])
                if not isinstance(result, NotFound | Conflict):
                    failures.append(_Failure(f"delete pod {d.name}", result))
                continue
            self.metrics.pods_deleted.labels(str(d.reason)).inc()
            if d.reason in MOVE_REASONS and d.replica_name not in moved:
                # Rule 12b: one per slice moved (or taken by its eviction), by cause.
                moved.add(d.replica_name)
                self.metrics.slices_moved.labels(str(d.reason)).inc()
            log.info("deleted pod %s/%s (%s): %s", ns, d.name, d.reason, d.message)

    async def _create_pods(
        self, key: str, creates: Sequence[PodCreate], failures: list[_Failure]
    ) -> float | None:
        ns, _ = split_key(key)
        results = await self._create_by_unit(ns, creates)
        created: list[str] = []
        for c, result in zip(creates, results, strict=True):
            if isinstance(result, BaseException):
                if not _quota_race(result):
                    failures.append(_Failure(f"create pod in group {c.group}", result))
                continue
            created.append(str(result["metadata"]["name"]))
            self.metrics.pods_created.labels(str(c.reason)).inc()
        # A pod the watch already delivered (before the POST returned) needs no waiting for.
        unseen = [n for n in created if self.caches.pods.get(f"{ns}/{n}") is None]
        self.expectations.expect(key, creates=unseen)
        if created:
            log.info("created %d pods for %s: %s", len(created), key, ", ".join(created))
        return await self._refused_slices(key, creates, results, failures)

    async def _create_by_unit(
        self, ns: str, creates: Sequence[PodCreate]
    ) -> list[Obj | BaseException]:
        """One slice's pods at once, the slices one after another (docs/design.md §4 rule
        13c). kube-apiserver admits concurrent creates against a quota in any order: eight
        pods of two slices sent together into room for five hosts may admit three of one
        and two of the other, and both slices are then undone, every attempt alike. Slice by
        slice, the first whole slice that fits gets in, as the planner's own check intends."""
        units: dict[tuple[str, str], list[int]] = {}
        for at, c in enumerate(creates):
            # A group's single-host pods are no slice: they go together.
            units.setdefault((c.group, c.replica_name or ""), []).append(at)
        results: list[Obj | BaseException | None] = [None] * len(creates)
        for members in units.values():
            answers = await self.writer.run_all(
                self.client.create(PODS, _in_namespace(creates[at].manifest, ns), namespace=ns)
                for at in members
            )
            for at, answer in zip(members, answers, strict=True):
                results[at] = answer
        return [r for r in results if r is not None]

    async def _refused_slices(
        self,
        key: str,
        creates: Sequence[PodCreate],
        results: Sequence[Any],
        failures: list[_Failure],
    ) -> float | None:
        """Rule 13c, as the planner settles it (`settle_creates`): records each refused
        group's hold and runs the deletes that undo its refused slices, in this pass; a group
        with a slice created whole is released. Answers the seconds to the nearest hold's end."""
        now = datetime.now(UTC)
        made = [None if isinstance(r, BaseException) else r for r in results]
        refused = {i: str(r) for i, r in enumerate(results) if isinstance(r, Forbidden)}
        settled = settle_creates(creates, made, refused)
        wait: float | None = None
        undo: list[PodDelete] = []
        for refusal in settled.refused:
            hold = self.holds.refuse(key, refusal, now)
            remaining = (hold.until - now).total_seconds()
            wait = remaining if wait is None else min(wait, remaining)
            log.warning(
                "group %s of %s held %.0fs: %s", refusal.group, key, remaining, hold.message
            )
            undo += refusal.undo
        self.holds.created(key, settled.whole)
        if undo:
            await self._delete_pods(key, undo, (), failures)
        return wait

    async def _release_finalizer(
        self, key: str, patch: Sequence[dict[str, Any]], failures: list[_Failure]
    ) -> None:
        ns, name = split_key(key)
        try:
            await self.client.json_patch(RAYCLUSTERS, ns, name, list(patch))
            log.info("released finalizer %s of %s", IDLE_TERMINATION_FINALIZER, key)
        except NotFound:
            pass
        except KubeError as exc:
            failures.append(_Failure("release finalizer", exc))

    async def _patch_annotations(
        self, key: str, obj: Obj, annotations: dict[str, str | None], failures: list[_Failure]
    ) -> None:
        """The crash-loop backoff's records (planning/features/backoff.py): written before the pod
        writes of the same pass, so a restart never forgets a counted break. Until the cache
        shows the write, the written values stand in for the cached ones."""
        ns, name = split_key(key)
        try:
            await self.client.patch(
                RAYCLUSTERS, ns, name, {"metadata": {"annotations": annotations}}
            )
            self._annotations[key] = (_version(obj), annotations)
        except NotFound:
            pass
        except KubeError as exc:
            failures.append(_Failure("patch annotations", exc))

    def _with_annotations(self, key: str, obj: Obj) -> Obj:
        written = self._annotations.get(key)
        if written is None:
            return obj
        version, annotations = written
        if _version(obj) != version:
            del self._annotations[key]  # the cache holds our write (or something newer)
            return obj
        meta = dict(Resource(obj).meta)
        merged = {**(meta.get("annotations") or {}), **annotations}
        meta["annotations"] = {k: v for k, v in merged.items() if v is not None}
        return {**obj, "metadata": meta}

    async def _record(self, obj: Obj, events: Iterable[PlannedEvent], pods: Sequence[Obj]) -> None:
        by_name = {p["metadata"]["name"]: p for p in pods}
        await self.writer.run_all(
            self.recorder.emit(
                by_name.get(e.regarding or "", obj),
                e.type,
                e.reason,
                e.message,
                action=e.action,
                related=by_name.get(e.related) if e.related else None,
            )
            for e in events
        )

    async def _write_status(
        self, key: str, obj: Obj, desired: dict[str, Any], failures: list[_Failure]
    ) -> None:
        # Compared as the installed CRD's schema will keep it (KubeRay's prunes our fields).
        patch = await self.crd.status_patch(obj, desired)
        if not patch:
            return
        ns, name = split_key(key)
        try:
            stored = await self.client.patch_status(RAYCLUSTERS, ns, name, patch)
            log.info("wrote status of %s (%s)", key, ", ".join(sorted(patch)))
            self.crd.learn(desired, stored)
            # What the server kept (after its pruning) stands in until the cache catches up.
            kept = stored.get("status") if isinstance(stored, dict) else None
            self.expectations.wrote_status(
                key, _version(obj), kept if isinstance(kept, dict) else desired
            )
        except NotFound:
            pass
        except KubeError as exc:
            failures.append(_Failure("write status", exc))

    async def _fail(self, obj: Obj, failures: Sequence[_Failure]) -> None:
        text = "; ".join(map(str, failures))
        if all(isinstance(f.error, KubeError) and f.error.terminal for f in failures):
            await self.recorder.emit(obj, "Warning", WRITE_REJECTED, text, action="Reconcile")
            raise TerminalError(text)
        raise ReconcileError(text)


def _quota_race(error: BaseException) -> bool:
    """A refusal that clears by itself (quota, a ServiceAccount not made yet) is handled by
    the hold (rule 13c), not a failed pass."""
    return isinstance(error, Forbidden) and refusal_reason(str(error)) in RACES


def _version(obj: Obj) -> str:
    return Resource(obj).resource_version


def _name(obj: Obj) -> str:
    return Resource(obj).name


def _in_namespace(manifest: Obj, ns: str) -> Obj:
    meta = dict(Resource(manifest).meta)
    meta["namespace"] = ns
    return {**manifest, "metadata": meta}
