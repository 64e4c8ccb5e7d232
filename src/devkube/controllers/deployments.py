"""The Deployment controller: one ReplicaSet per pod template, rolled by the strategy.

As kube-controller-manager's, reduced to what `kubectl apply/rollout status/scale/get` and an
operator's own Deployment need:

- the ReplicaSet for the current template is `<deployment>-<pod-template-hash>`, its selector,
  template labels and own labels carry `pod-template-hash`, it is owned (controller=true) by
  the Deployment, and carries `deployment.kubernetes.io/revision` (a rollback reuses the old
  set with a new revision);
- `Recreate` scales every old set to 0 and waits until their pods are gone before scaling the
  new one up; `RollingUpdate` keeps at most replicas+maxSurge pods and at least
  replicas-maxUnavailable available (percentages: surge rounds up, unavailable down; both 0
  means 1 unavailable), old sets scaled down oldest first, their unavailable pods first;
- a scale-only change resizes the current set; `spec.paused` stops rollouts, not status;
- status: replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas,
  observedGeneration, conditions Available and Progressing;
- `spec.progressDeadlineSeconds` (600 unless set): Progressing's lastUpdateTime moves on each
  sign of progress (more updated, ready or available pods, fewer old ones); a rollout that
  makes none for that long turns Progressing False with reason ProgressDeadlineExceeded
  (which `kubectl rollout status` reports as a failure) until it progresses again; a
  complete or paused Deployment never times out;
- `status.collisionCount`: when the name `<deployment>-<hash>` is held by a ReplicaSet that is
  not this Deployment's with this template, the count goes up and is mixed into the hash, so
  the next try picks another name;
- sets beyond `revisionHistoryLimit` (default 10) that have scaled to 0 are deleted.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from devkube.controllers.workloads import (
    APPS,
    EXPECTATION_TTL,
    HASH_LABEL,
    REVISION,
    PassLoop,
    controller_uid,
    meta,
    owner_reference,
    replicas_of,
    set_condition,
    template_hash,
    uid,
)
from devkube.machinery.client import ApiClient, ApiError, resource_path
from devkube.machinery.informer import Informer
from kubefacts.objects import Obj
from kubefacts.timestamps import parse_time, rfc3339

log = logging.getLogger(__name__)

PATH = resource_path(APPS, "deployments")
#: kube-controller-manager's default when a Deployment does not set one.
PROGRESS_DEADLINE_SECONDS = 600
PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"


def _int_or_percent(value: Any, total: int, *, round_up: bool, default: str) -> int:
    raw = default if value is None else value
    if isinstance(raw, int):
        return raw
    text = str(raw)
    if text.endswith("%"):
        fraction = total * int(text[:-1]) / 100
        return math.ceil(fraction) if round_up else math.floor(fraction)
    return int(text)


def rolling_limits(deployment: Obj) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as pod counts."""
    replicas = replicas_of(deployment)
    rolling = ((deployment.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    surge = _int_or_percent(rolling.get("maxSurge"), replicas, round_up=True, default="25%")
    unavailable = _int_or_percent(
        rolling.get("maxUnavailable"), replicas, round_up=False, default="25%"
    )
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def _status(rs: Obj, key: str) -> int:
    return int((rs.get("status") or {}).get(key) or 0)


def _spec_replicas(rs: Obj) -> int:
    return replicas_of(rs)


def _revision(rs: Obj) -> int:
    try:
        return int((meta(rs).get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


def collision_count(deployment: Obj) -> int | None:
    value = (deployment.get("status") or {}).get("collisionCount")
    return int(value) if value is not None else None


def progress_deadline(deployment: Obj) -> int:
    value = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
    return PROGRESS_DEADLINE_SECONDS if value is None else int(value)


def _made_progress(current: Obj, counts: dict[str, int]) -> bool:
    """kube-controller-manager's test: more updated, ready or available pods, or fewer old."""

    def was(key: str) -> int:
        return int(current.get(key) or 0)

    old_before = was("replicas") - was("updatedReplicas")
    old_now = counts["replicas"] - counts["updatedReplicas"]
    return (
        counts["updatedReplicas"] > was("updatedReplicas")
        or old_now < old_before
        or counts["readyReplicas"] > was("readyReplicas")
        or counts["availableReplicas"] > was("availableReplicas")
    )


def _timed_out(condition: Obj | None, deadline: int, now: datetime) -> bool:
    if condition is None or condition.get("reason") == "NewReplicaSetAvailable":
        return False
    if condition.get("reason") == PROGRESS_DEADLINE_EXCEEDED:
        return True
    try:
        since = parse_time(str(condition.get("lastUpdateTime") or ""))
    except ValueError:
        return False
    return since + timedelta(seconds=deadline) < now


def _age_key(rs: Obj) -> tuple[str, str]:
    return str(meta(rs).get("creationTimestamp", "")), str(meta(rs).get("name", ""))


def new_replicaset(deployment: Obj, pod_hash: str, replicas: int, revision: int) -> dict[str, Any]:
    spec = deployment.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), HASH_LABEL: pod_hash}
    selector = copy.deepcopy(spec.get("selector") or {})
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: pod_hash}
    body: dict[str, Any] = {
        "apiVersion": APPS,
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta(deployment)['name']}-{pod_hash}",
            "namespace": meta(deployment).get("namespace"),
            "labels": dict(tmeta["labels"]),
            "annotations": {REVISION: str(revision)},
            "ownerReferences": [owner_reference(deployment, "Deployment")],
        },
        "spec": {"replicas": replicas, "selector": selector, "template": template},
    }
    if spec.get("minReadySeconds"):
        body["spec"]["minReadySeconds"] = spec["minReadySeconds"]
    return body


class DeploymentController:
    def __init__(
        self,
        client: ApiClient,
        *,
        pods: Informer,
        replicasets: Informer,
        deployments: Informer | None = None,
    ) -> None:
        self._client = client
        self.pods = pods
        self.replicasets = replicasets
        self.deployments = deployments or Informer(client, PATH)
        # Writes the caches may not show yet: ReplicaSet uid -> (spec.replicas, deadline) and
        # Deployment uid -> (created set's name, deadline). A deployment with one pending
        # waits, so it never acts twice on the same stale view.
        self._scaled: dict[str, tuple[int, float]] = {}
        self._created: dict[str, tuple[str, float]] = {}
        # Deployment uid -> (collisionCount written, deadline): the next name is drawn only
        # once the cache shows the new count.
        self._collided: dict[str, tuple[int, float]] = {}
        self._loop = PassLoop(
            "devcluster deployments", [self.deployments, replicasets, pods], self.sync
        )

    async def start(self) -> None:
        await self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def sync(self) -> None:
        deployments = list(self.deployments.cache.values())
        if not deployments:
            return
        now = asyncio.get_running_loop().time()
        owned: dict[str, list[Obj]] = {}
        for rs in list(self.replicasets.cache.values()):
            owner = controller_uid(rs)
            if owner is not None:
                owned.setdefault(owner, []).append(rs)
        pods_by_owner: dict[str, int] = {}
        for pod in list(self.pods.cache.values()):
            owner = controller_uid(pod)
            if owner is not None:
                pods_by_owner[owner] = pods_by_owner.get(owner, 0) + 1
        await asyncio.gather(
            *(self._sync_one(d, owned.get(uid(d), []), pods_by_owner, now) for d in deployments)
        )

    def _waiting(self, deployment: Obj, sets: list[Obj], now: float) -> bool:
        collided = self._collided.get(uid(deployment))
        if collided is not None:
            if collided[1] > now and (collision_count(deployment) or 0) < collided[0]:
                return True
            del self._collided[uid(deployment)]
        created = self._created.get(uid(deployment))
        if created is not None:
            if created[1] > now and not any(meta(rs)["name"] == created[0] for rs in sets):
                return True
            del self._created[uid(deployment)]
        waiting = False
        for rs in sets:
            scaled = self._scaled.get(uid(rs))
            if scaled is None:
                continue
            if scaled[1] > now and _spec_replicas(rs) != scaled[0]:
                waiting = True
            else:
                del self._scaled[uid(rs)]
        return waiting

    async def _sync_one(
        self, deployment: Obj, sets: list[Obj], pods_by_owner: dict[str, int], now: float
    ) -> None:
        if meta(deployment).get("deletionTimestamp"):
            return
        spec = deployment.get("spec") or {}
        template = spec.get("template") or {}
        pod_hash = template_hash(template, collision_count(deployment))
        new = next(
            (rs for rs in sets if (meta(rs).get("labels") or {}).get(HASH_LABEL) == pod_hash), None
        )
        if new is None:  # made under another collisionCount: the same template all the same
            plain = template_hash(template)
            new = next(
                (rs for rs in sets if template_hash(_template(rs)) == plain),
                None,
            )
        old = sorted((rs for rs in sets if rs is not new), key=_age_key)
        created_now = False
        if not spec.get("paused") and not self._waiting(deployment, sets, now):
            if new is None:
                created_now = await self._create(deployment, pod_hash, old, pods_by_owner, now)
            else:
                await self._roll(deployment, new, old, pods_by_owner, now)
            await self._clean_history(deployment, old)
        rs_name = meta(new)["name"] if new is not None else f"{meta(deployment)['name']}-{pod_hash}"
        await self._write_status(deployment, new, old, created_now, rs_name)

    async def _create(
        self,
        deployment: Obj,
        pod_hash: str,
        old: list[Obj],
        pods_by_owner: dict[str, int],
        now: float,
    ) -> bool:
        replicas = replicas_of(deployment)
        if self._recreate(deployment):
            start = (
                0
                if any(_spec_replicas(rs) or pods_by_owner.get(uid(rs)) for rs in old)
                else replicas
            )
        else:
            surge, _ = rolling_limits(deployment)
            total = sum(_spec_replicas(rs) for rs in old)
            start = replicas if total == 0 else max(0, min(replicas, replicas + surge - total))
        revision = max((_revision(rs) for rs in old), default=0) + 1
        body = new_replicaset(deployment, pod_hash, start, revision)
        namespace = meta(deployment).get("namespace")
        try:
            await self._client.create(resource_path(APPS, "replicasets", namespace), body)
        except ApiError as error:
            if error.status == 409 and not await self._ours(deployment, body):
                await self._collide(deployment, now)
                return False
            if error.status != 409:
                log.warning(
                    "deployment %s: creating its replica set: %s", meta(deployment)["name"], error
                )
                self._loop.poke()
                return False
        self._created[uid(deployment)] = (body["metadata"]["name"], now + EXPECTATION_TTL)
        log.info(
            "deployment %s/%s: created replica set %s",
            namespace,
            meta(deployment)["name"],
            body["metadata"]["name"],
        )
        return True

    async def _ours(self, deployment: Obj, body: Obj) -> bool:
        """The set holding the name is this Deployment's, with this template (the cache had not
        shown it yet): no collision."""
        path = resource_path(APPS, "replicasets", meta(body).get("namespace"), meta(body)["name"])
        try:
            found = await self._client.get(path)
        except ApiError:
            return False
        template = (deployment.get("spec") or {}).get("template") or {}
        return controller_uid(found) == uid(deployment) and template_hash(
            _template(found)
        ) == template_hash(template)

    async def _collide(self, deployment: Obj, now: float) -> None:
        count = (collision_count(deployment) or 0) + 1
        path = resource_path(
            APPS, "deployments", meta(deployment).get("namespace"), meta(deployment)["name"]
        )
        try:
            await self._client.patch(f"{path}/status", {"status": {"collisionCount": count}})
        except ApiError as error:
            log.warning("status of %s: %s", path, error)
        else:
            self._collided[uid(deployment)] = (count, now + EXPECTATION_TTL)
            log.info("deployment %s: hash collision, collisionCount %d", path, count)
        self._loop.poke()

    @staticmethod
    def _recreate(deployment: Obj) -> bool:
        strategy = (deployment.get("spec") or {}).get("strategy") or {}
        return strategy.get("type") == "Recreate"

    async def _roll(
        self, deployment: Obj, new: Obj, old: list[Obj], pods_by_owner: dict[str, int], now: float
    ) -> None:
        replicas = replicas_of(deployment)
        newest_old = max((_revision(rs) for rs in old), default=0)
        if _revision(new) <= newest_old:  # a rollback: the old template is the newest revision
            revision = {REVISION: str(newest_old + 1)}
            await self._patch_rs(new, {"metadata": {"annotations": revision}})
        active_old = [rs for rs in old if _spec_replicas(rs) > 0]
        if self._recreate(deployment):
            for rs in active_old:
                await self._scale(rs, 0, now)
            if any(pods_by_owner.get(uid(rs)) for rs in old) or active_old:
                return
            if _spec_replicas(new) != replicas:
                await self._scale(new, replicas, now)
            return
        if not active_old:
            if _spec_replicas(new) != replicas:
                await self._scale(new, replicas, now)
            return
        surge, unavailable = rolling_limits(deployment)
        everything = [new, *old]
        total = sum(_spec_replicas(rs) for rs in everything)
        # Up: the new set grows within replicas + maxSurge.
        room = replicas + surge - total
        if room > 0 and _spec_replicas(new) < replicas:
            await self._scale(new, min(replicas, _spec_replicas(new) + room), now)
            return
        # Down: old sets shrink while replicas - maxUnavailable stay available.
        min_available = replicas - unavailable
        new_unavailable = max(0, _spec_replicas(new) - _status(new, "availableReplicas"))
        budget = total - min_available - new_unavailable
        if budget <= 0:
            return
        targets = {uid(rs): _spec_replicas(rs) for rs in active_old}
        for rs in active_old:  # unavailable old pods first: losing them costs nothing
            unhealthy = max(0, targets[uid(rs)] - _status(rs, "availableReplicas"))
            step = min(budget, unhealthy)
            targets[uid(rs)] -= step
            budget -= step
        available = sum(_status(rs, "availableReplicas") for rs in everything)
        budget = min(budget, available - min_available)
        for rs in active_old:  # then oldest first
            if budget <= 0:
                break
            step = min(budget, targets[uid(rs)])
            targets[uid(rs)] -= step
            budget -= step
        for rs in active_old:
            if targets[uid(rs)] != _spec_replicas(rs):
                await self._scale(rs, targets[uid(rs)], now)

    async def _scale(self, rs: Obj, replicas: int, now: float) -> None:
        if await self._patch_rs(rs, {"spec": {"replicas": replicas}}):
            self._scaled[uid(rs)] = (replicas, now + EXPECTATION_TTL)
            log.info("scaled replica set %s to %d", meta(rs)["name"], replicas)

    async def _patch_rs(self, rs: Obj, patch: dict[str, Any]) -> bool:
        path = resource_path(APPS, "replicasets", meta(rs).get("namespace"), meta(rs)["name"])
        try:
            await self._client.patch(path, patch)
        except ApiError as error:
            if error.status != 404:
                log.warning("%s: %s", path, error)
                self._loop.poke()
            return False
        return True

    async def _clean_history(self, deployment: Obj, old: list[Obj]) -> None:
        limit = (deployment.get("spec") or {}).get("revisionHistoryLimit")
        keep = 10 if limit is None else int(limit)
        idle = [rs for rs in old if _spec_replicas(rs) == 0 and _status(rs, "replicas") == 0]
        for rs in idle[: max(0, len(idle) - keep)]:
            path = resource_path(APPS, "replicasets", meta(rs).get("namespace"), meta(rs)["name"])
            try:
                await self._client.delete(path, uid=uid(rs))
            except ApiError as error:
                if error.status not in (404, 409):
                    log.warning("%s: %s", path, error)

    async def _write_status(
        self, deployment: Obj, new: Obj | None, old: list[Obj], created_now: bool, rs_name: str
    ) -> None:
        replicas = replicas_of(deployment)
        everything = [rs for rs in [new, *old] if rs is not None]
        _, unavailable = rolling_limits(deployment)
        if self._recreate(deployment):
            unavailable = 0  # as the real controller: Recreate tolerates none
        counts = {
            "replicas": sum(_status(rs, "replicas") for rs in everything),
            "updatedReplicas": _status(new, "replicas") if new is not None else 0,
            "readyReplicas": sum(_status(rs, "readyReplicas") for rs in everything),
            "availableReplicas": sum(_status(rs, "availableReplicas") for rs in everything),
        }
        counts["unavailableReplicas"] = max(0, replicas - counts["availableReplicas"])
        current = deployment.get("status") or {}
        moment = datetime.now(UTC)
        now = rfc3339(moment)
        conditions = list(current.get("conditions") or [])
        if counts["availableReplicas"] >= replicas - unavailable:
            conditions = set_condition(
                conditions,
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
                now,
            )
        else:
            conditions = set_condition(
                conditions,
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                now,
            )
        complete = (
            new is not None
            and counts["updatedReplicas"] == replicas
            and counts["replicas"] == replicas
            and counts["availableReplicas"] == replicas
        )
        conditions = _progressing(
            deployment,
            conditions,
            counts,
            now=moment,
            created_now=created_now,
            complete=complete,
            rs_name=rs_name,
        )
        conditions.sort(key=lambda c: 0 if c.get("type") == "Available" else 1)
        status: dict[str, Any] = {k: (v or None) for k, v in counts.items()}
        status["observedGeneration"] = meta(deployment).get("generation", 1)
        status["conditions"] = conditions
        if all(
            current.get(k) == v for k, v in status.items() if k != "conditions"
        ) and _same_conditions(current.get("conditions") or [], conditions):
            return
        path = resource_path(
            APPS,
            "deployments",
            meta(deployment).get("namespace"),
            meta(deployment)["name"],
            "status",
        )
        try:
            await self._client.patch(path, {"status": status})
        except ApiError as error:
            if error.status != 404:
                log.warning("status of %s: %s", path, error)


def _template(rs: Obj) -> Obj:
    template: Obj = (rs.get("spec") or {}).get("template") or {}
    return template


def _progressing(
    deployment: Obj,
    conditions: list[dict[str, Any]],
    counts: dict[str, int],
    *,
    now: datetime,
    created_now: bool,
    complete: bool,
    rs_name: str,
) -> list[dict[str, Any]]:
    """The conditions with Progressing as kube-controller-manager's rollout status sets it."""
    stamp = rfc3339(now)
    current = deployment.get("status") or {}
    condition = next((c for c in conditions if c.get("type") == "Progressing"), None)
    if (deployment.get("spec") or {}).get("paused"):
        paused = ("DeploymentPaused", "Deployment is paused")
        return set_condition(conditions, "Progressing", "Unknown", *paused, stamp)
    if created_now:
        created = ("NewReplicaSetCreated", f'Created new replica set "{rs_name}"')
        return set_condition(conditions, "Progressing", "True", *created, stamp)
    if complete:
        done = ("NewReplicaSetAvailable", f'ReplicaSet "{rs_name}" has successfully progressed.')
        return set_condition(conditions, "Progressing", "True", *done, stamp)
    updated = ("ReplicaSetUpdated", f'ReplicaSet "{rs_name}" is progressing.')
    if condition is None or _made_progress(current, counts):
        # Progress moves lastUpdateTime even when the reason stays: the deadline counts from it.
        out = set_condition(conditions, "Progressing", "True", *updated, stamp)
        out[-1]["lastUpdateTime"] = stamp
        return out
    if _timed_out(condition, progress_deadline(deployment), now):
        timed_out = (
            PROGRESS_DEADLINE_EXCEEDED,
            f'ReplicaSet "{rs_name}" has timed out progressing.',
        )
        return set_condition(conditions, "Progressing", "False", *timed_out, stamp)
    return conditions


def _same_conditions(a: list[Any], b: list[Any]) -> bool:
    def strip(conditions: list[Any]) -> list[tuple[Any, ...]]:
        return sorted(
            (c.get("type"), c.get("status"), c.get("reason"), c.get("message")) for c in conditions
        )

    return strip(a) == strip(b)
