"""An in-memory stand-in for the part of ``KubeClient`` the reconciler and its Event recorder
use, and a world that feeds its objects into real informer caches.

The fake keeps the API's rules that the reconciler relies on: ``generateName``, uids and
resourceVersions, ``AlreadyExists`` for a taken name, ``NotFound``, a uid precondition on
delete (``Conflict``), the status subresource (a merge patch of ``.status`` only), JSON patch
``test``/``remove``. It does not run a scheduler or kubelet: pods stay as created unless a
test changes them. The cache lags the fake until ``sync()``, as an informer lags the server,
so tests can put the reconciler in front of a stale cache on purpose.
"""

from __future__ import annotations

import copy
import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from raycluster_operator.api import labels
from raycluster_operator.controller.raycluster.metrics import ClusterMetrics
from raycluster_operator.controller.raycluster.reconciler import Reconciler
from raycluster_operator.controller.raycluster.sources import Sources
from raycluster_operator.controller.runtime.events import EventRecorder
from raycluster_operator.controller.runtime.metrics import Metrics
from raycluster_operator.controller.runtime.reconcile import Result
from raycluster_operator.controller.runtime.writer import Writer
from raycluster_operator.kube import (
    EVENTS,
    PODS,
    RAYCLUSTERS,
    AlreadyExists,
    Conflict,
    Invalid,
    Kind,
    KubeError,
    NotFound,
)
from raycluster_operator.planning import PlanOptions
from tests.harness.objects import Obj

WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})
NS = "default"
NAME = "c"
KEY = f"{NS}/{NAME}"


class FakeKube:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.counts: Counter[str] = Counter()
        #: Every request, as (verb, plural, name).
        self.calls: list[tuple[str, str, str]] = []
        self._rv = itertools.count(1)
        self._suffix = itertools.count(1)
        self._failures: dict[tuple[str, str], KubeError] = {}

    # -- test controls ---------------------------------------------------------------------

    def fail(self, verb: str, plural: str, error: KubeError | None) -> None:
        """Answer every ``verb`` on ``plural`` with ``error`` from now on (None: stop)."""
        if error is None:
            self._failures.pop((verb, plural), None)
        else:
            self._failures[(verb, plural)] = error

    def put(self, kind: Kind, obj: Obj) -> Obj:
        """Store ``obj`` as the server would after a create, without counting a request."""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", NS)
        meta.setdefault("uid", f"uid-{meta['name']}")
        meta.setdefault("creationTimestamp", _now())
        meta["resourceVersion"] = str(next(self._rv))
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        self.objects[(kind.plural, meta["namespace"], meta["name"])] = obj
        return obj

    def get_obj(self, kind: Kind, name: str, ns: str = NS) -> Obj | None:
        return self.objects.get((kind.plural, ns, name))

    def remove(self, kind: Kind, name: str, ns: str = NS) -> None:
        del self.objects[(kind.plural, ns, name)]

    def of_kind(self, kind: Kind) -> list[Obj]:
        return [o for (plural, _, _), o in self.objects.items() if plural == kind.plural]

    @property
    def writes(self) -> int:
        return sum(n for verb, n in self.counts.items() if verb in WRITE_VERBS)

    def writes_of(self, verb: str, plural: str) -> list[str]:
        return [name for v, p, name in self.calls if (v, p) == (verb, plural)]

    # -- the KubeClient surface ------------------------------------------------------------

    def _request(self, verb: str, plural: str, name: str) -> None:
        self.counts[verb] += 1
        self.calls.append((verb, plural, name))
        error = self._failures.get((verb, plural))
        if error is not None:
            raise copy.copy(error)

    async def get(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        """Reads by name: the reconciler reads only the installed CRD this way (none is
        installed here, so it compares status without a schema, as without the grant)."""
        self._request("get", kind.plural, name)
        return copy.deepcopy(self._existing(kind, namespace, name))

    async def create(self, kind: Kind, obj: Obj, namespace: str | None = None) -> Obj:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise Invalid("name or generateName is required", code=422)
            meta["name"] = f"{meta['generateName']}{next(self._suffix):05d}"
        meta["namespace"] = namespace or meta.get("namespace") or NS
        self._request("create", kind.plural, meta["name"])
        if (kind.plural, meta["namespace"], meta["name"]) in self.objects:
            raise AlreadyExists(f"{kind.kind} {meta['name']} exists", code=409)
        meta["uid"] = f"uid-{meta['name']}-{next(self._suffix)}"
        return copy.deepcopy(self.put(kind, obj))

    async def delete(
        self, kind: Kind, namespace: str | None, name: str, *, uid: str | None = None, **_: Any
    ) -> None:
        self._request("delete", kind.plural, name)
        key = (kind.plural, namespace or NS, name)
        obj = self.objects.get(key)
        if obj is None:
            raise NotFound(f"{kind.kind} {name} not found", code=404)
        if uid and obj["metadata"].get("uid") != uid:
            raise Conflict("uid precondition failed", code=409)
        del self.objects[key]

    async def json_patch(
        self, kind: Kind, namespace: str | None, name: str, ops: Sequence[Obj]
    ) -> Obj:
        self._request("patch", kind.plural, name)
        obj = self._existing(kind, namespace, name)
        for op in ops:
            *parents, last = op["path"].strip("/").split("/")
            target: Any = obj
            for part in parents:
                target = target[int(part)] if isinstance(target, list) else target[part]
            index: Any = int(last) if isinstance(target, list) else last
            if op["op"] == "test" and target[index] != op["value"]:
                raise Invalid(f"test of {op['path']} failed", code=422)
            if op["op"] == "remove":
                del target[index]
        return self._bump(obj)

    async def patch(
        self, kind: Kind, namespace: str | None, name: str, patch: Obj, *, subresource: str = ""
    ) -> Obj:
        """A merge patch of the object (the reconciler patches only a RayCluster's
        annotations this way: the crash-loop backoff's records)."""
        self._request("patch", kind.plural, name)
        obj = self._existing(kind, namespace, name)
        obj.update(merge(obj, patch))
        return self._bump(obj)

    async def patch_status(self, kind: Kind, namespace: str, name: str, status: Obj) -> Obj:
        self._request("patch", f"{kind.plural}/status", name)
        obj = self._existing(kind, namespace, name)
        obj["status"] = merge(obj.get("status") or {}, status)
        return self._bump(obj)

    async def create_event(self, event: Obj) -> Obj:
        return await self.create(EVENTS, event)

    async def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj:
        self._request("patch", EVENTS.plural, name)
        obj = self._existing(EVENTS, namespace, name)
        obj.update(merge(obj, patch))
        return self._bump(obj)

    def _existing(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        obj = self.objects.get((kind.plural, namespace or NS, name))
        if obj is None:
            raise NotFound(f"{kind.kind} {name} not found", code=404)
        return obj

    def _bump(self, obj: Obj) -> Obj:
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        return copy.deepcopy(obj)


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class World:
    """A fake API, real caches fed from it on ``sync()``, and a real ``Reconciler``."""

    def __init__(self, options: PlanOptions | None = None) -> None:
        self.kube = FakeKube()
        self.sources = Sources(self.kube)  # type: ignore[arg-type]
        #: The operator's registry, and the RayCluster metrics on it.
        self.registry = Metrics()
        self.metrics = ClusterMetrics(self.registry.registry)
        self.reconciler = Reconciler(
            self.kube,  # type: ignore[arg-type]
            self.sources.caches,
            writer=Writer(),
            recorder=EventRecorder(self.kube),  # type: ignore[arg-type]
            metrics=self.metrics,
            options=options,
        )
        self.sources.subscribe(self.reconciler.observe)

    def sync(self, *plurals: str) -> None:
        """Let the caches catch up with the fake (only the kinds in ``plurals`` if given)."""
        for informer in self.sources.informers:
            if plurals and informer.kind.plural not in plurals:
                continue
            wanted = {
                f"{o['metadata']['namespace']}/{o['metadata']['name']}": o
                for o in self.kube.of_kind(informer.kind)
                if informer.label_selector is None
                or informer.label_selector in (o["metadata"].get("labels") or {})
            }
            for key in list(informer.store):
                if key not in wanted:
                    informer.apply("DELETED", informer.store.get(key) or {})
            for key, obj in wanted.items():
                cached = informer.store.get(key)
                version = obj["metadata"]["resourceVersion"]
                if cached is None or cached["metadata"]["resourceVersion"] != version:
                    informer.apply("MODIFIED", copy.deepcopy(obj))

    async def reconcile(self, key: str = KEY) -> Result:
        return await self.reconciler.reconcile(key)

    async def step(self, key: str = KEY) -> int:
        """Sync, reconcile once; the number of writes the pass made."""
        self.sync()
        before = self.kube.writes
        await self.reconcile(key)
        return self.kube.writes - before

    async def converge(self, key: str = KEY, passes: int = 10) -> None:
        for _ in range(passes):
            if await self.step(key) == 0:
                return
        raise AssertionError(f"{key} did not converge in {passes} passes")

    # -- reading the fake ------------------------------------------------------------------

    def pods(self, group: str | None = None) -> list[Obj]:
        return [
            p
            for p in self.kube.of_kind(PODS)
            if group is None or (p["metadata"].get("labels") or {}).get(labels.GROUP) == group
        ]

    def slices(self, group: str) -> dict[str, list[int]]:
        """Replica name -> sorted host indices of the group's pods."""
        out: dict[str, list[int]] = {}
        for pod in self.pods(group):
            lab = pod["metadata"]["labels"]
            out.setdefault(lab[labels.REPLICA_NAME], []).append(int(lab[labels.HOST_INDEX]))
        return {name: sorted(hosts) for name, hosts in out.items()}

    def events(self, reason: str | None = None) -> list[Obj]:
        return [e for e in self.kube.of_kind(EVENTS) if reason is None or e["reason"] == reason]

    def cluster(self) -> Obj:
        obj = self.kube.get_obj(RAYCLUSTERS, NAME)
        assert obj is not None
        return obj


def raycluster(*groups: Obj, name: str = NAME, **spec: Any) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": NS, "generation": 1},
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [_c("ray-head")]}},
            },
            "workerGroupSpecs": list(groups),
            **spec,
        },
    }


def cpu_group(name: str = "cpu", *, replicas: int = 1, hosts: int = 1, **extra: Any) -> Obj:
    return {
        "groupName": name,
        "replicas": replicas,
        "minReplicas": 0,
        "maxReplicas": 10,
        "numOfHosts": hosts,
        "rayStartParams": {},
        "template": {"spec": {"containers": [_c("ray-worker")]}},
        **extra,
    }


def tpu_group(name: str = "tpu", *, replicas: int = 1, **extra: Any) -> Obj:
    group = cpu_group(name, replicas=replicas, hosts=4, **extra)
    spec = group["template"]["spec"]
    spec["nodeSelector"] = {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
    }
    spec["containers"][0]["resources"]["limits"] = {"google.com/tpu": "4"}
    spec["containers"][0]["resources"]["requests"]["google.com/tpu"] = "4"
    return group


def _c(name: str) -> Obj:
    return {
        "name": name,
        "image": "rayproject/ray:2.60.0",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }


def names(objs: Iterable[Obj]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)
