"""The disruption controller, as kube-controller-manager's keeps PodDisruptionBudget status.

For each budget it counts the pods its selector matches in its namespace and writes:
- `expectedPods` and `desiredHealthy`: with an integer `minAvailable`, the matched pods and
  that number; with a percentage `minAvailable` or any `maxUnavailable`, the scale of the
  pods' controllers (read from their `/scale` subresource, a Deployment's through its
  ReplicaSet), `desiredHealthy` = expected - maxUnavailable (rounded up) or minAvailable%
  (rounded up); a selected pod whose controller has no scale makes the sync fail, as in kube
  (`SyncFailed`, no disruption allowed); pods without a controller are left out; with
  neither field both are 0, so no eviction of a healthy pod is ever allowed, as in kube;
- `currentHealthy`: matched pods Ready, not terminating and not just evicted;
- `disruptedPods`: the eviction API's records (server/admission/eviction.py) of pods it let go, kept
  until the pod is terminating or gone, or 2 minutes have passed (kube's DeletionTimeout);
- `disruptionsAllowed` = currentHealthy - desiredHealthy, never below 0, and 0 while no pod is
  expected; `observedGeneration`; the `DisruptionAllowed` condition (SufficientPods,
  InsufficientPods, SyncFailed).

Status is replaced with the budget's resourceVersion, so a pass never undoes an eviction it did
not see (a Conflict is retried at the next pass). A pass runs on every pod or budget change and
at least every `every` seconds (disruptedPods expire by time).

A pass costs O(the change), not O(all pods x all budgets) (issue #26: two budgets per
RayCluster, thousands of pods): pods are indexed by namespace and label as their events come,
and a pass syncs only the budgets marked dirty: a budget that changed, the budgets whose
selector may match a pod that changed (looked up by the pod's labels, old and new), those whose
last write failed, and, on every pass, those that read time or other objects (disruptedPods
records to expire; percentage or maxUnavailable budgets, which read their controllers' scale).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Hashable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from devkube.machinery.client import ApiClient, ApiError, WatchEvent, resource_path
from devkube.machinery.control_loop import ControlLoop
from devkube.machinery.index import Index
from devkube.machinery.informer import Informer, Key, key_of
from devkube.machinery.selectors import label_selector_matches
from kubefacts.timestamps import now_rfc3339, parse_time

log = logging.getLogger(__name__)

PDB_PATH = "/apis/policy/v1/poddisruptionbudgets"
#: kube's DeletionTimeout: an eviction not followed by the pod's deletion within it is void.
DELETION_TIMEOUT = timedelta(minutes=2)
#: Kinds whose replica count answers a percentage budget: (apiVersion prefix, plural).
_SCALED = {
    "ReplicaSet": ("apps/v1", "replicasets"),
    "StatefulSet": ("apps/v1", "statefulsets"),
    "Deployment": ("apps/v1", "deployments"),
    "ReplicationController": ("v1", "replicationcontrollers"),
}


class SyncFailed(Exception):
    """The budget's expected pods cannot be known."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def scaled_value(value: Any, total: int, *, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%"):
        return int(text)
    share = int(text[:-1]) * total / 100
    return math.ceil(share) if round_up else math.floor(share)


def _controller(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((o for o in _meta(pod).get("ownerReferences") or [] if o.get("controller")), None)


class DisruptionController:
    def __init__(self, client: ApiClient, *, pods: Informer, every: float = 2.0) -> None:
        self._client = client
        self.pods = pods
        self.budgets = Informer(client, PDB_PATH)
        self._loop = ControlLoop(
            "devcluster disruption", self.sync, period=every, failure="disruption pass failed"
        )
        # Before the index: a pod's event reads where the index filed it until now.
        pods.subscribe(self._pod_changed)
        self._pods = Index(pods, _pod_keys)
        # Budgets by the one key a matching pod must be filed under (_budget_key).
        self._budgets = Index(self.budgets, lambda pdb: (_budget_key(pdb),))
        self.budgets.subscribe(self._budget_changed)
        # Budgets to sync at the next pass, by informer key; None: every budget.
        self._dirty: set[Key] | None = None
        # Budgets synced at every pass (_reads_time_or_scale).
        self._timed: set[Key] = set()
        #: Budgets synced so far (tests count them).
        self.synced = 0

    def _budget_changed(self, event: WatchEvent) -> None:
        if event.type == "SYNC":
            self._dirty = None
        elif event.type in ("ADDED", "MODIFIED") and self._dirty is not None:
            self._dirty.add(key_of(event.object))
        self._loop.changed(event)

    def _pod_changed(self, event: WatchEvent) -> None:
        """Mark the budgets that may select the pod as it was or as it is now."""
        if event.type == "SYNC":
            self._dirty = None
        elif self._dirty is not None:
            meta = _meta(event.object)
            ns = str(meta.get("namespace") or "")
            keys: set[Hashable] = {(ns, "", ""), *_pod_keys(event.object)}
            keys.update(self._pods.filed_under(key_of(event.object)))
            for key in keys:
                self._dirty.update(self._budgets.bucket(key))
        self._loop.changed(event)

    async def start(self) -> None:
        self.budgets.start()
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
        await self.budgets.stop()

    async def sync(self) -> None:
        if not self.budgets.synced.is_set():
            return
        dirty, self._dirty = self._dirty, set()
        if dirty is None:
            dirty = set(self.budgets.cache)
        dirty |= self._timed
        for key in dirty:
            pdb = self.budgets.cache.get(key)
            if pdb is None:
                continue
            self.synced += 1
            try:
                await self._sync_one(pdb, self._selected(pdb))
            except ApiError as error:
                if self._dirty is not None:  # a Conflict or a failure: again next pass
                    self._dirty.add(key)
                if error.status not in (404, 409):
                    log.warning("disruption: %s: %s", _meta(pdb).get("name"), error)
            if _reads_time_or_scale(self.budgets.cache.get(key) or pdb):
                self._timed.add(key)
            else:
                self._timed.discard(key)

    def _selected(self, pdb: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The pods the budget's selector matches, looked at through one index bucket."""
        selector = (pdb.get("spec") or {}).get("selector")
        if selector is None:
            return []  # a null selector matches nothing
        candidates = self._pods.bucket(_budget_key(pdb)).values()
        return [
            pod
            for pod in candidates
            if label_selector_matches(selector, _meta(pod).get("labels") or {})
        ]

    async def _sync_one(self, pdb: Mapping[str, Any], pods: list[Mapping[str, Any]]) -> None:
        now = datetime.now(UTC)
        disrupted = _still_disrupted(pdb, pods, now)
        try:
            expected, desired = await self._expected(pdb, pods)
        except SyncFailed as failure:
            await self._write(pdb, _failed_status(pdb, str(failure)))
            return
        healthy = sum(
            1
            for pod in pods
            if not _meta(pod).get("deletionTimestamp")
            and _meta(pod).get("name") not in disrupted
            and _ready(pod)
        )
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        old = dict(pdb.get("status") or {})
        status: dict[str, Any] = {
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "disruptionsAllowed": allowed,
            "observedGeneration": int(_meta(pdb).get("generation") or 0),
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        status["conditions"] = _condition(old, status, allowed > 0)
        if old == status:
            return
        await self._write(pdb, status)

    async def _expected(
        self, pdb: Mapping[str, Any], pods: list[Mapping[str, Any]]
    ) -> tuple[int, int]:
        spec = pdb.get("spec") or {}
        if spec.get("maxUnavailable") is not None:
            expected = await self._scale(pods)
            gone = scaled_value(spec["maxUnavailable"], expected, round_up=True)
            return expected, max(expected - gone, 0)
        minimum = spec.get("minAvailable")
        if isinstance(minimum, int):
            return len(pods), minimum
        if minimum is not None:
            expected = await self._scale(pods)
            return expected, scaled_value(minimum, expected, round_up=True)
        # Neither field: kube's getExpectedPodCount leaves both at 0, so no disruption is
        # ever allowed (a budget that says nothing protects everything it selects).
        return 0, 0

    async def _scale(self, pods: list[Mapping[str, Any]]) -> int:
        """The sum of the replicas of the selected pods' controllers, each counted once."""
        seen: dict[str, int] = {}
        for pod in pods:
            owner = _controller(pod)
            if owner is None:
                continue  # kube: unmanaged pods are left out of the count
            uid = str(owner.get("uid"))
            if uid not in seen:
                seen[uid] = await self._replicas_of(owner, str(_meta(pod).get("namespace")), pod)
        return sum(seen.values())

    async def _replicas_of(self, owner: Mapping[str, Any], ns: str, pod: Mapping[str, Any]) -> int:
        kind = str(owner.get("kind"))
        name = str(owner.get("name"))
        if kind == "ReplicaSet":
            rs = await self._get("apps/v1", "replicasets", ns, name)
            parent = _controller(rs) if rs else None
            if parent is not None and parent.get("kind") == "Deployment":
                kind, name = "Deployment", str(parent.get("name"))
        where = _SCALED.get(kind)
        scale = await self._get(where[0], where[1], ns, name, "scale") if where else None
        if scale is None:
            raise SyncFailed(f'found no controllers for pod "{_meta(pod).get("name")}"')
        return int((scale.get("spec") or {}).get("replicas") or 0)

    async def _get(
        self, api: str, plural: str, ns: str, name: str, sub: str = ""
    ) -> Mapping[str, Any] | None:
        path = resource_path(api, plural, ns, name) + (f"/{sub}" if sub else "")
        try:
            return await self._client.get(path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def _write(self, pdb: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        meta = _meta(pdb)
        body = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "spec": pdb.get("spec") or {},
            "status": status,
        }
        path = resource_path(
            "policy/v1", "poddisruptionbudgets", str(meta.get("namespace")), str(meta.get("name"))
        )
        await self._client.replace(f"{path}/status", body)


def _pod_keys(pod: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """Where a pod is filed: its namespace, and each of its labels in its namespace."""
    meta = _meta(pod)
    ns = str(meta.get("namespace") or "")
    labels = meta.get("labels") or {}
    return ((ns, "", ""), *((ns, str(k), str(v)) for k, v in labels.items()))


def _budget_key(pdb: Mapping[str, Any]) -> tuple[str, str, str]:
    """The pod key every pod the budget selects is filed under: its selector's first
    matchLabels pair, else its namespace alone."""
    ns = str(_meta(pdb).get("namespace") or "")
    match = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if not match:
        return (ns, "", "")
    key, value = sorted(match.items())[0]
    return (ns, str(key), str(value))


def _reads_time_or_scale(pdb: Mapping[str, Any]) -> bool:
    """Its status may change with no pod or budget event: disruptedPods records expire, and a
    percentage or maxUnavailable budget reads its pods' controllers' scale."""
    spec = pdb.get("spec") or {}
    return (
        bool((pdb.get("status") or {}).get("disruptedPods"))
        or spec.get("maxUnavailable") is not None
        or isinstance(spec.get("minAvailable"), str)
    )


def _still_disrupted(
    pdb: Mapping[str, Any], pods: list[Mapping[str, Any]], now: datetime
) -> dict[str, str]:
    """kube's buildDisruptedPodMap: a record stays while its pod exists, is not terminating
    and the eviction is younger than the deletion timeout."""
    records: Mapping[str, str] = (pdb.get("status") or {}).get("disruptedPods") or {}
    live = {str(_meta(p).get("name")): p for p in pods}
    kept: dict[str, str] = {}
    for name, stamp in records.items():
        pod = live.get(name)
        if pod is None or _meta(pod).get("deletionTimestamp"):
            continue
        try:
            expired = parse_time(stamp) + DELETION_TIMEOUT < now
        except ValueError:
            expired = True
        if expired:
            log.info("disruption: pod %s was expected to be deleted by now", name)
            continue
        kept[name] = stamp
    return kept


def _condition(
    old: Mapping[str, Any],
    status: Mapping[str, Any],
    allowed: bool,
    reason: str = "",
    message: str = "",
) -> list[dict[str, Any]]:
    """`DisruptionAllowed`, its transition time moving only when its status does."""
    conditions = [dict(c) for c in old.get("conditions") or []]
    want = "True" if allowed else "False"
    previous = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
    moved = previous is None or previous.get("status") != want
    condition = {
        "type": "DisruptionAllowed",
        "status": want,
        "reason": reason or ("SufficientPods" if allowed else "InsufficientPods"),
        "message": message,
        "observedGeneration": int(status.get("observedGeneration") or 0),
        "lastTransitionTime": (
            now_rfc3339() if moved or previous is None else previous.get("lastTransitionTime")
        ),
    }
    return [c for c in conditions if c.get("type") != "DisruptionAllowed"] + [condition]


def _failed_status(pdb: Mapping[str, Any], message: str) -> dict[str, Any]:
    """kube's failSafe: nothing may be disrupted while the budget cannot be computed."""
    old = dict(pdb.get("status") or {})
    status: dict[str, Any] = {
        "currentHealthy": int(old.get("currentHealthy") or 0),
        "desiredHealthy": int(old.get("desiredHealthy") or 0),
        "expectedPods": int(old.get("expectedPods") or 0),
        "disruptionsAllowed": 0,
        "observedGeneration": int(_meta(pdb).get("generation") or 0),
    }
    status["conditions"] = _condition(old, status, False, "SyncFailed", message)
    return status
