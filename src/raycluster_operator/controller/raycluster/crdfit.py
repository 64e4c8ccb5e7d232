"""Living with whichever ``rayclusters.ray.io`` CRD is installed: ours, or KubeRay's.

KubeRay's CRD declares none of our status extensions (slice counts) and none of our spec
extensions (``idleSuspend``, ``idleTerminationOptions``), and preserves no unknown fields, so
the API server prunes them. Two consequences, both handled here:

- the status the operator wants is compared with the stored one *after* the same pruning
  (the installed CRD's status schema, read with a ``get`` on that one CRD), so a converged
  cluster costs no writes; a status whose only difference is ``lastUpdateTime`` is no change,
  since that timestamp records changes and nothing the server keeps has changed;
- a spec field the user applied (``kubectl.kubernetes.io/last-applied-configuration``) that
  the installed schema prunes is reported with a Warning Event on the RayCluster, once per
  applied configuration, instead of being silently ignored; a CRD lacking our extensions is logged.

Without permission to read the CRD (a namespaced install has no cluster-scoped grant) the
status pruning is learned instead: a field we wrote that the server's answer lacks was pruned,
and is left out of later comparisons. See docs/design.md, "Running beside KubeRay's CRD".
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from raycluster_operator.api.crd import NAME, VERSION
from raycluster_operator.api.objects import Obj
from raycluster_operator.controller.raycluster.mergepatch import merge_patch
from raycluster_operator.controller.runtime.events import EventRecorder
from raycluster_operator.kube import CRDS, KubeClient, KubeError, prune

log = logging.getLogger(__name__)

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
#: How often the installed CRD is read again (it may be replaced while the operator runs).
REFRESH_SECONDS = 60.0
#: Our spec extensions: without them in the installed CRD, a feature silently stops working.
SPEC_EXTENSIONS = {
    "idleSuspend": "Ray's autoscaler v2 idle policy Suspend cannot suspend the cluster",
    "idleTerminationOptions": "Ray's autoscaler v2 idle policy is dropped",
}
PRUNED_REASON = "SpecFieldsPruned"


class InstalledCrd:
    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        *,
        clock: Callable[[], float] = time.monotonic,
        refresh: float = REFRESH_SECONDS,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self._clock = clock
        self._refresh = refresh
        self._schema: Mapping[str, Any] | None = None
        #: Identifies the installed schema's content (refreshes re-read the same CRD).
        self._digest = 0
        self._fetched_at: float | None = None
        self._unreadable_logged = False
        self._missing_logged: frozenset[str] = frozenset()
        #: Status paths ("[]" for any list index) the server was seen to prune.
        self._learned: set[tuple[str, ...]] = set()
        #: Cluster uid -> (applied configuration, schema) already checked.
        self._reported: dict[str, tuple[str, int]] = {}

    async def schema(self) -> Mapping[str, Any] | None:
        """The served ``v1`` openAPIV3Schema, re-read every ``refresh`` seconds."""
        now = self._clock()
        if self._fetched_at is not None and now - self._fetched_at < self._refresh:
            return self._schema
        self._fetched_at = now
        try:
            crd = await self.client.get(CRDS, None, NAME)
        except KubeError as exc:
            if not self._unreadable_logged:
                self._unreadable_logged = True
                log.warning(
                    "cannot read CRD %s (%s): status is compared before the API server's "
                    "pruning; grant get on customresourcedefinitions %s (deploy/base/rbac.yaml)",
                    NAME,
                    exc,
                    NAME,
                )
            return self._schema
        self._schema = served_schema(crd)
        self._digest = hash(json.dumps(self._schema, sort_keys=True))
        self._log_missing_extensions()
        return self._schema

    def _log_missing_extensions(self) -> None:
        spec = _child(self._schema, "spec")
        if spec is None or spec.get("x-kubernetes-preserve-unknown-fields"):
            return
        props = spec.get("properties") or {}
        missing = frozenset(k for k in SPEC_EXTENSIONS if k not in props)
        if missing and missing != self._missing_logged:
            for key in sorted(missing):
                log.warning(
                    "the installed CRD %s does not declare spec.%s, so the API server prunes "
                    "it: %s (install ours: raycluster-operator manifests crd)",
                    NAME,
                    key,
                    SPEC_EXTENSIONS[key],
                )
        self._missing_logged = missing

    def use(self, crd: Mapping[str, Any] | None) -> None:
        """The CRD as its watch delivered it (``crdwatch``): held at once, so a CRD replaced
        under a running operator is compared against within seconds, not at the next
        refresh; what was learned from writes belonged to the old schema and is dropped."""
        self._schema = served_schema(crd) if crd is not None else None
        self._digest = hash(json.dumps(self._schema, sort_keys=True))
        self._fetched_at = self._clock()
        self._learned.clear()
        self._log_missing_extensions()

    async def status_patch(self, obj: Obj, desired: Obj) -> Obj:
        """The merge patch that takes the stored status to ``desired`` as the server would
        keep it; empty when nothing the server keeps would change."""
        schema = await self.schema()
        await self._report_pruned_spec(obj, schema)
        status_schema = _child(schema, "status")
        stored = obj.get("status") or {}
        if status_schema is not None:
            kept, _ = prune(desired, status_schema)
            # The cached status may predate a CRD swap; the server prunes it as it reads it.
            stored, _ = prune(stored, status_schema)
        else:
            kept = _without(desired, self._learned, ())
        patch = merge_patch(stored, kept)
        if set(patch) <= {"lastUpdateTime"}:
            return {}
        return patch

    def learn(self, sent: Obj, stored: Obj) -> None:
        """Remember the status fields the server dropped from what we wrote (only needed, and
        only used, when the CRD cannot be read)."""
        if self._schema is None:
            _dropped(sent, stored.get("status") or {}, (), self._learned)

    async def _report_pruned_spec(self, obj: Obj, schema: Mapping[str, Any] | None) -> None:
        meta = obj.get("metadata") or {}
        applied = (meta.get("annotations") or {}).get(LAST_APPLIED)
        spec_schema = _child(schema, "spec")
        if not applied or spec_schema is None:
            return
        uid = str(meta.get("uid") or "")
        # Checked once per applied configuration and installed schema, not every pass.
        seen = (applied, self._digest)
        if self._reported.get(uid) == seen:
            return
        if len(self._reported) > 4096:
            self._reported.clear()
        self._reported[uid] = seen
        try:
            spec = json.loads(applied).get("spec")
        except (ValueError, AttributeError):
            return
        _, dropped = prune(spec, spec_schema)
        if not dropped:
            return
        fields = ", ".join(f"spec.{path}" for path in dropped)
        await self.recorder.emit(
            obj,
            "Warning",
            PRUNED_REASON,
            f"the installed CRD {NAME} does not declare {fields}: the API server dropped "
            "them and they have no effect (raycluster-operator manifests crd installs a CRD "
            "that declares our extensions)",
            action="Validate",
        )


def _dropped(sent: Any, stored: Any, path: tuple[str, ...], out: set[tuple[str, ...]]) -> None:
    if isinstance(sent, dict) and isinstance(stored, dict):
        for key, value in sent.items():
            if value is None:
                continue
            if key not in stored:
                out.add((*path, key))
            else:
                _dropped(value, stored[key], (*path, key), out)
    elif isinstance(sent, list) and isinstance(stored, list) and len(sent) == len(stored):
        for mine, theirs in zip(sent, stored, strict=True):
            _dropped(mine, theirs, (*path, "[]"), out)


def _without(value: Any, dropped: set[tuple[str, ...]], path: tuple[str, ...]) -> Any:
    if not dropped:
        return value
    if isinstance(value, dict):
        return {
            k: _without(v, dropped, (*path, k))
            for k, v in value.items()
            if (*path, k) not in dropped
        }
    if isinstance(value, list):
        return [_without(v, dropped, (*path, "[]")) for v in value]
    return value


def served_schema(crd: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("name") == VERSION:
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            return schema if isinstance(schema, Mapping) else None
    return None


def _child(schema: Mapping[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    if schema is None:
        return None
    child = (schema.get("properties") or {}).get(key)
    return child if isinstance(child, Mapping) else None
