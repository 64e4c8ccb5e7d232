"""One RayCluster, one pass: read the caches, ask planning what to do, do it.

The reconciler decides nothing about pods; ``planning.plan_cluster`` does, from the cached
cluster, pods and services. This module only executes a plan safely:

- it plans only when the cache shows every write of the previous pass (expectations), so a
  lagging informer never causes a double create or a repeated delete;
- deletes go first (with a uid precondition), then creates, all hosts of a slice at once
  through the bounded writer;
- every create and delete reaches a log line and a metric with its named reason, and the
  plan's Events (one per replica created or deleted, with the reason) are recorded after the
  writes;
- status is merge-patched through the status subresource only when it differs, so a
  converged cluster costs no writes; the spec is never written;
- clusters that name another controller in ``spec.managedBy`` are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubefacts.names import random_suffix
from raycluster_operator.api.validation import parse_cluster
from raycluster_operator.controller.crdfit import InstalledCrd
from raycluster_operator.controller.events import EventRecorder
from raycluster_operator.controller.expectations import Expectations
from raycluster_operator.controller.metrics import Metrics
from raycluster_operator.controller.store import StoreView, split_key
from raycluster_operator.controller.writer import Writer
from raycluster_operator.kube import (
    PODS,
    RAYCLUSTERS,
    AlreadyExists,
    Conflict,
    KubeClient,
    KubeError,
    NotFound,
    kind_of,
)
from raycluster_operator.planning import (
    IDLE_TERMINATION_FINALIZER,
    ClusterPlan,
    CreateReason,
    DeleteReason,
    PodCreate,
    PodDelete,
    plan_cluster,
    plan_deletion,
)
from raycluster_operator.planning.status import unreadable_status

log = logging.getLogger(__name__)

Obj = dict[str, Any]
#: ``spec.managedBy`` values that mean "this operator" (KubeRay's own value included: we are
#: a drop-in replacement for it).
DEFAULT_CONTROLLER_NAMES = frozenset({"ray.io/kuberay-operator", "ray.io/raycluster-operator"})


def new_suffix() -> str:
    return random_suffix()


@dataclass(frozen=True)
class ReconcilerOptions:
    multi_host_indexing: bool = True
    random_pod_delete: bool = False
    controller_names: frozenset[str] = DEFAULT_CONTROLLER_NAMES


class ReconcileError(Exception):
    """Some writes of a pass failed; the key is retried with backoff."""


@dataclass
class Outcome:
    """What one pass did (for tests, logs and the requeue decision)."""

    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    status_written: bool = False
    skipped: str = ""
    requeue_after: float | None = None


class Reconciler:
    def __init__(
        self,
        client: KubeClient,
        *,
        clusters: StoreView,
        pods: StoreView,
        services: StoreView,
        expectations: Expectations,
        writer: Writer,
        recorder: EventRecorder,
        metrics: Metrics,
        options: ReconcilerOptions = ReconcilerOptions(),
        extras: Mapping[str, StoreView] | None = None,
    ) -> None:
        self.client = client
        self.clusters = clusters
        self.pods = pods
        self.services = services
        self.expectations = expectations
        self.writer = writer
        self.recorder = recorder
        self.metrics = metrics
        self.options = options
        #: Caches of the autoscaler's ServiceAccount/Role/RoleBinding, by kind. Without one
        #: for a kind, an object is created once per operator run and never re-checked.
        self.extras = dict(extras or {})
        #: Extra objects created (or found existing) but not yet in the cache: not created
        #: again while the cache catches up, or ever if the cache never shows them (a
        #: same-named object without our label, which is not ours to replace).
        self._known_extras: set[tuple[str, str, str]] = set()
        #: Status we wrote, by cluster, with the resourceVersion of the object it was
        #: computed from: until the cache moves past that version, the same status is not
        #: written again (the cache merely has not seen our write yet).
        self._written: dict[str, tuple[str, dict[str, Any]]] = {}
        self.crd = InstalledCrd(client, recorder)
        #: Generation of clusters already reported as unreadable (one Warning per change).
        self._unreadable: dict[str, object] = {}

    def extra_deleted(self, kind: str, namespace: str, name: str) -> None:
        """An autoscaler object left the cache: the next pass creates it again, even if it
        went before a pass ever saw it there."""
        self._known_extras.discard((kind, namespace, name))

    async def reconcile(self, key: str) -> Outcome:
        ns, name = split_key(key)
        obj = self.clusters.get(key)
        if obj is None:
            self._written.pop(key, None)
            self._unreadable.pop(key, None)
            self.expectations.forget(key)
            self.metrics.forget_cluster(ns, name)
            return Outcome(skipped="gone")
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return await self._finish_deletion(key, obj)
        spec = obj.get("spec")
        managed_by = spec.get("managedBy") if isinstance(spec, dict) else None
        if managed_by and managed_by not in self.options.controller_names:
            return Outcome(skipped=f"managed by {managed_by}")

        pods = self.pods.by_index("cluster", key)
        cached = {p["metadata"]["name"]: bool(p["metadata"].get("deletionTimestamp")) for p in pods}
        if not self.expectations.satisfied(key, cached.get):
            return Outcome(
                skipped="waiting for cache", requeue_after=self.expectations.remaining(key)
            )

        cluster, problems = parse_cluster(obj)
        if cluster is None:
            generation = meta.get("generation") or meta.get("resourceVersion")
            if self._unreadable.get(key) != generation:
                self._unreadable[key] = generation
                text = "; ".join(str(p) for p in problems) or "the RayCluster cannot be read"
                await self.recorder.emit(obj, "Warning", "InvalidSpec", text, action="Validate")
            observed = meta.get("generation")
            status = unreadable_status(
                obj.get("status") or {},
                problems,
                observed if isinstance(observed, int) else None,
                now=datetime.now(UTC),
            )
            outcome = Outcome(skipped="invalid")
            failures: list[str] = []
            await self._write_status(ns, name, obj, status, outcome, failures)
            if failures:
                raise ReconcileError("; ".join(failures))
            return outcome
        self._unreadable.pop(key, None)

        services = self.services.by_index("owner", key)
        plan = plan_cluster(
            cluster,
            pods,
            services,
            now=datetime.now(UTC),
            new_suffix=new_suffix,
            multi_host_indexing=self.options.multi_host_indexing,
            random_pod_delete=self.options.random_pod_delete,
        )
        return await self._execute(key, obj, plan, pods)

    async def _finish_deletion(self, key: str, obj: Obj) -> Outcome:
        """Carry out ``plan_deletion``: the pods first, then Ray's finalizer (metadata only)."""
        pods = self.pods.by_index("cluster", key)
        cached = {p["metadata"]["name"]: bool(p["metadata"].get("deletionTimestamp")) for p in pods}
        if not self.expectations.satisfied(key, cached.get):
            return Outcome(
                skipped="waiting for cache", requeue_after=self.expectations.remaining(key)
            )
        plan = plan_deletion(obj, pods)
        if plan is None:
            return Outcome(skipped="deleting")
        ns, name = split_key(key)
        outcome = Outcome(skipped="deleting")
        failures: list[str] = []
        if plan.deletes:
            await self._delete(key, obj, plan.deletes, pods, outcome, failures)
            await self.recorder.emit(
                obj,
                "Normal",
                DeleteReason.CLUSTER_DELETING.value,
                f"RayCluster is being deleted: removing {len(plan.deletes)} pods",
                action="DeletePod",
            )
        if plan.release_finalizer:
            try:
                await self.client.json_patch(RAYCLUSTERS, ns, name, plan.release_finalizer)
                log.info("released finalizer %s of %s", IDLE_TERMINATION_FINALIZER, key)
            except NotFound:
                pass
            except KubeError as exc:
                failures.append(f"release finalizer: {exc}")
        if failures:
            raise ReconcileError("; ".join(failures))
        return outcome

    async def _execute(self, key: str, obj: Obj, plan: ClusterPlan, pods: Sequence[Obj]) -> Outcome:
        ns, name = split_key(key)
        outcome = Outcome()
        failures: list[str] = []

        await self._ensure_services(ns, plan, failures)
        await self._ensure_extras(ns, plan, failures)
        if plan.deletes:
            await self._delete(key, obj, plan.deletes, pods, outcome, failures)
        if plan.creates:
            await self._create(key, obj, plan.creates, outcome, failures)
        by_name = {p["metadata"]["name"]: p for p in pods}
        await self.writer.run_all(
            self.recorder.emit(
                by_name.get(event.regarding or "", obj),
                event.type,
                event.reason,
                event.message,
                action=_action(event.reason),
            )
            for event in plan.events
        )
        await self._write_status(ns, name, obj, plan.status, outcome, failures)
        self.metrics.set_slices(ns, name, list(plan.status.get("workerGroups") or []))
        if failures:
            raise ReconcileError("; ".join(failures))
        return outcome

    async def _ensure_services(self, ns: str, plan: ClusterPlan, failures: list[str]) -> None:
        missing = [
            svc
            for svc in plan.services
            if svc["metadata"]["name"] in plan.missing_services
            and self.services.get(f"{ns}/{svc['metadata']['name']}") is None
        ]
        if not missing:
            return
        results = await self.writer.run_all(
            self.client.create(kind_of(svc), svc, namespace=ns) for svc in missing
        )
        for svc, result in zip(missing, results, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, AlreadyExists):
                failures.append(f"create service {svc['metadata']['name']}: {result}")
            elif not isinstance(result, BaseException):
                log.info("created service %s/%s", ns, svc["metadata"]["name"])

    async def _ensure_extras(self, ns: str, plan: ClusterPlan, failures: list[str]) -> None:
        for extra in plan.extra_objects:
            ident = (str(extra.get("kind")), ns, str(extra["metadata"]["name"]))
            cache = self.extras.get(ident[0])
            if cache is not None and cache.get(f"{ns}/{ident[2]}") is not None:
                # Seen in the cache: from now on its absence there means it was deleted.
                self._known_extras.discard(ident)
                continue
            if ident in self._known_extras:
                continue
            try:
                await self.client.create(kind_of(extra), extra, namespace=ns)
            except AlreadyExists:
                pass
            except (KubeError, KeyError) as exc:
                failures.append(f"create {ident[0]} {ident[2]}: {exc}")
                continue
            self._known_extras.add(ident)

    async def _delete(
        self,
        key: str,
        obj: Obj,
        deletes: Sequence[PodDelete],
        pods: Sequence[Obj],
        outcome: Outcome,
        failures: list[str],
    ) -> None:
        ns, _ = split_key(key)
        uids = {p["metadata"]["name"]: p["metadata"].get("uid") for p in pods}
        self.expectations.expect(key, deletes=[d.name for d in deletes])
        results = await self.writer.run_all(
            self.client.delete(PODS, ns, d.name, uid=d.uid or uids.get(d.name)) for d in deletes
        )
        done: list[PodDelete] = []
        for d, result in zip(deletes, results, strict=True):
            if isinstance(result, NotFound | Conflict):
                # Already gone, or replaced by a namesake: nothing of ours left to delete.
                self.expectations.forget_names(key, deletes=[d.name])
                continue
            if isinstance(result, BaseException):
                self.expectations.forget_names(key, deletes=[d.name])
                failures.append(f"delete pod {d.name}: {result}")
                continue
            done.append(d)
            outcome.deleted.append(d.name)
            self.metrics.pods_deleted.labels(str(d.reason)).inc()
            log.info("deleted pod %s/%s (%s): %s", ns, d.name, d.reason, d.message)

    async def _create(
        self,
        key: str,
        obj: Obj,
        creates: Sequence[PodCreate],
        outcome: Outcome,
        failures: list[str],
    ) -> None:
        ns, _ = split_key(key)
        results = await self.writer.run_all(
            self.client.create(PODS, _in_namespace(c.manifest, ns), namespace=ns) for c in creates
        )
        created: list[tuple[PodCreate, str]] = []
        for c, result in zip(creates, results, strict=True):
            if isinstance(result, BaseException):
                failures.append(f"create pod in group {c.group}: {result}")
                continue
            pod_name = str(result["metadata"]["name"])
            created.append((c, pod_name))
            outcome.created.append(pod_name)
            self.metrics.pods_created.labels(str(c.reason)).inc()
        # A pod the watch already delivered (before the POST returned) needs no waiting for.
        unseen = [n for _, n in created if self.pods.get(f"{ns}/{n}") is None]
        self.expectations.expect(key, creates=unseen)
        if created:
            log.info(
                "created %d pods for %s: %s", len(created), key, ", ".join(n for _, n in created)
            )

    async def _write_status(
        self,
        ns: str,
        name: str,
        obj: Obj,
        desired: dict[str, Any],
        outcome: Outcome,
        failures: list[str],
    ) -> None:
        # Compared as the installed CRD's schema will keep it (KubeRay's prunes our fields).
        patch = await self.crd.status_patch(obj, desired)
        if not patch:
            return
        key = f"{ns}/{name}"
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        if self._written.get(key) == (version, desired):
            return  # already written; the cache has not caught up with our own write
        try:
            stored = await self.client.patch_status(RAYCLUSTERS, ns, name, patch)
            self.crd.learn(desired, stored)
            outcome.status_written = True
            self._written[key] = (version, desired)
        except NotFound:
            pass
        except KubeError as exc:
            failures.append(f"write status: {exc}")


_CREATE_REASONS = frozenset(r.value for r in CreateReason)
_DELETE_REASONS = frozenset(r.value for r in DeleteReason)


def _action(reason: str) -> str:
    """The Event's ``action``: what the operator did about it."""
    if reason in _CREATE_REASONS:
        return "CreatePod"
    if reason in _DELETE_REASONS:
        return "DeletePod"
    return "Reconcile"


def _in_namespace(manifest: Obj, ns: str) -> Obj:
    meta = dict(manifest.get("metadata") or {})
    meta["namespace"] = ns
    return {**manifest, "metadata": meta}
