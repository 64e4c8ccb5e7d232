"""What the API server does to an object on create, update, patch and delete.

This is the registry-strategy layer of the real server in small: names and namespaces,
uid/generation/resourceVersion bookkeeping, status-subresource separation, finalizers,
graceful pod deletion and built-in defaults that clients commonly read back.
"""

from __future__ import annotations

import copy
import functools
import json
import random
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from devkube.server.errors import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    invalid,
    not_found,
)
from devkube.server.registry import admitting, deletion, patches
from devkube.server.registry.resources import Registry, ResourceType
from devkube.server.registry.selectors import Selection
from devkube.server.registry.store import Store, Stored, encode
from devkube.server.registry.strategies import (
    budgets,
    configdata,
    crds,
    defaults,
    events,
    jobs,
    limitranges,
    quotas,
    rbacbindings,
    validation,
    workloads,
)
from devkube.server.schema import builtin, structural
from devkube.server.schema.cel import rules
from kubefacts.limitrange import requests_from_limits
from kubefacts.names import random_suffix
from kubefacts.objects import Obj
from kubefacts.timestamps import rfc3339

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
DNS_LABEL = re.compile(rf"^{_DNS_LABEL}$")
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
UNDELETABLE_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
CRD_KEY = "customresourcedefinitions.apiextensions.k8s.io"
NS_KEY = "namespaces"
STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)
POD_UPDATE_FORBIDDEN = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
    "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only "
    "additions to existing tolerations), `spec.terminationGracePeriodSeconds`"
)


def thaw(obj: Any) -> Any:
    """A private deep copy of a stored (shared, never-mutated) object."""
    return json.loads(json.dumps(obj))


class Objects:
    """Object semantics over a `Store`, shared by every HTTP handler."""

    def __init__(
        self,
        store: Store,
        registry: Registry,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.registry = registry
        self.rng = rng or random.Random()
        self.clock = clock
        self._cluster_ips = defaults.ClusterIPs()
        # Admission run on create and update before validation: (type, old or None, new).
        self.admission: list[Callable[[ResourceType, Obj | None, Obj], None]] = []
        # Validating admission, run after validation (LimitRanger's checks, PodSecurity,
        # ResourceQuota last), as kube-apiserver's registry runs it; `admitting` tells them
        # whether the write is a dry run and collects their warnings.
        self.validating: list[Callable[[ResourceType, Obj | None, Obj], None]] = []
        for ns in SYSTEM_NAMESPACES:
            self.create(self._type("", "namespaces"), None, {"metadata": {"name": ns}})

    def _type(self, group: str, plural: str) -> ResourceType:
        for rt in self.registry:
            if rt.group == group and rt.plural == plural:
                return rt
        raise KeyError(plural)

    def now(self) -> str:
        return rfc3339(self.clock())

    # reads -----------------------------------------------------------------------------------
    def get(self, rt: ResourceType, ns: str | None, name: str) -> Stored:
        stored = self.store.get(rt.storage_key, ns or "", name)
        if stored is None:
            raise not_found(rt.plural, rt.group, name)
        return stored

    def list(self, rt: ResourceType, selection: Selection) -> list[Stored]:
        return [
            s
            for s in self.store.iter(rt.storage_key, selection.namespace)
            if selection.matches(s.obj)
        ]

    def view(self, rt: ResourceType, stored: Stored) -> Obj:
        """The object as served at `rt`'s version (CRD versions and Event shapes share storage)."""
        if rt.group == events.GROUP:
            return events.to_events_v1(stored.obj, rt.api_version)
        if stored.obj.get("apiVersion") == rt.api_version:
            return stored.obj
        return {**stored.obj, "apiVersion": rt.api_version}

    def raw(self, rt: ResourceType, stored: Stored) -> bytes:
        """The JSON of `view`, reusing the stored encoding when no conversion is needed."""
        if rt.group != events.GROUP and stored.obj.get("apiVersion") == rt.api_version:
            return stored.raw
        return encode(self.view(rt, stored))

    # create ----------------------------------------------------------------------------------
    def create(
        self,
        rt: ResourceType,
        ns: str | None,
        body: Any,
        *,
        dry_run: bool = False,
        fields: structural.FieldValidation | None = None,
    ) -> Stored:
        obj = self._body(rt, body, fields)
        meta = obj["metadata"]
        self._place(rt, ns, meta)
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise invalid(
                    rt.kind,
                    rt.group,
                    "",
                    [("metadata.name", "Required value: name or generateName is required")],
                )
            # Like the real server (RetryGenerateName), a taken random suffix is drawn again.
            for _ in range(8):
                meta["name"] = prefix + random_suffix(self.rng.choice)
                if self.store.get(rt.storage_key, meta.get("namespace", ""), meta["name"]) is None:
                    break
        self._check_name(rt, meta["name"])
        if self.store.get(rt.storage_key, meta.get("namespace", ""), meta["name"]) is not None:
            raise already_exists(rt.plural, rt.group, meta["name"])
        if rt.namespaced:
            self._require_namespace(meta["namespace"])
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.now()
        if rt.tracks_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if rt.status_subresource and not rt.builtin:
            obj.pop("status", None)
        self._prepare_create(rt, obj)
        with admitting.request(dry_run, fields):
            for admit in self.admission:
                admit(rt, None, obj)
            if rt.storage_key == "pods":
                defaults.pod_status(obj)  # after LimitRanger, as PrepareForCreate runs
            self._validate(rt, obj)
            self._rules(rt, obj, None)
            for admit in self.validating:
                admit(rt, None, obj)
        if dry_run:
            meta["resourceVersion"] = str(self.store.rv)
            return Stored(obj, self.store.rv)
        meta["resourceVersion"] = str(self.store.next_rv())
        stored = self.store.put(rt.storage_key, obj)
        self._after_write(rt, stored)
        return stored

    def _body(
        self, rt: ResourceType, body: Any, fields: structural.FieldValidation | None = None
    ) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        obj: Obj = thaw(body)
        if obj.get("kind") not in (None, "", rt.kind):
            raise bad_request(
                f"the kind {obj.get('kind')!r} does not match the resource {rt.plural!r}"
            )
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if not rt.builtin and rt.schema:
            obj = self._structural(rt, obj, fields)
        elif rt.builtin and builtin.has_schema(rt.api_version, rt.kind):
            self._decode_builtin(rt, obj, fields)
        if rt.group == events.GROUP:
            obj = events.to_core(obj)
        elif rt.builtin and rt.group == "" and rt.plural == "secrets":
            configdata.secret_from_request(obj)
        return obj

    def _decode_builtin(
        self, rt: ResourceType, obj: Obj, fields: structural.FieldValidation | None
    ) -> None:
        """Drop unknown fields and refuse wrong types as the Go decoder does (``builtin``)."""
        decoded = builtin.decode(obj, rt.api_version, rt.kind)
        prefix = f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
        if decoded.type_error:
            raise bad_request(prefix + decoded.type_error)
        mode = fields.mode if fields is not None else structural.IGNORE
        if decoded.unknown and mode == structural.STRICT:
            unknown = ", ".join(f'unknown field "{path}"' for path in decoded.unknown)
            raise bad_request(f"{prefix}strict decoding error: {unknown}")
        if decoded.unknown and mode == structural.WARN and fields is not None:
            fields.warnings += [f'unknown field "{path}"' for path in decoded.unknown]

    def _structural(
        self, rt: ResourceType, obj: Obj, fields: structural.FieldValidation | None
    ) -> Obj:
        """Prune, default and validate a custom object as kube-apiserver does (see
        ``schema.structural``); unknown fields are refused, warned about or dropped as asked."""
        shaped = structural.apply(obj, rt.schema)
        mode = fields.mode if fields is not None else structural.IGNORE
        if shaped.unknown and mode == structural.STRICT:
            unknown = ", ".join(f'unknown field "{path}"' for path in shaped.unknown)
            raise bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"strict decoding error: {unknown}"
            )
        if shaped.unknown and mode == structural.WARN and fields is not None:
            fields.warnings += [f'unknown field "{path}"' for path in shaped.unknown]
        if shaped.causes:
            name = str((obj.get("metadata") or {}).get("name") or "")
            raise invalid(rt.kind, rt.group, name, shaped.causes)
        result: Obj = shaped.obj
        return result

    def _place(self, rt: ResourceType, ns: str | None, meta: dict[str, Any]) -> None:
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and ns and body_ns != ns:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            target = ns or body_ns
            if not target:
                raise bad_request("a namespace is required for namespaced resources")
            meta["namespace"] = target
        else:
            meta.pop("namespace", None)

    def _check_name(self, rt: ResourceType, name: str) -> None:
        if rt.group == "rbac.authorization.k8s.io":
            ok = name not in (".", "..") and "/" not in name and "%" not in name
        elif rt.plural == "namespaces":
            ok = bool(DNS_LABEL.match(name)) and len(name) <= 63
        elif rt.plural == "services":
            ok = bool(DNS_1035.match(name)) and len(name) <= 63
        else:
            ok = bool(DNS_SUBDOMAIN.match(name)) and len(name) <= 253
        if not ok:
            raise invalid(
                rt.kind,
                rt.group,
                name,
                [
                    (
                        "metadata.name",
                        f'Invalid value: "{name}": a lowercase RFC 1123 name is required',
                    )
                ],
            )

    def _require_namespace(self, ns: str) -> None:
        stored = self.store.get(NS_KEY, "", ns)
        if stored is None:
            raise not_found("namespaces", "", ns)
        if stored.obj["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {ns} because it is being terminated",
            )

    def _prepare_create(self, rt: ResourceType, obj: Obj) -> None:
        if rt.builtin and rt.group == "":
            if rt.plural == "pods":
                defaults.pod(obj)
            elif rt.plural == "services":
                self._cluster_ips.default_service(obj)
            elif rt.plural == "namespaces":
                obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
                obj["status"] = {"phase": "Active"}
                obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj[
                    "metadata"
                ]["name"]
        elif rt.builtin and rt.group == "apps" and rt.plural == "deployments":
            defaults.deployment(obj)
        elif rt.builtin and rt.group == "batch" and rt.plural == "jobs":
            jobs.default_job(obj)
        elif rt.storage_key == CRD_KEY:
            crds.default_crd(obj)
            found = crds.problems(obj)
            if found:
                raise invalid(rt.kind, rt.group, obj["metadata"]["name"], found)
            obj["status"] = crds.accepted_status(obj, self.now())

    # update ----------------------------------------------------------------------------------
    def update(
        self,
        rt: ResourceType,
        ns: str | None,
        name: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
        fields: structural.FieldValidation | None = None,
    ) -> Stored:
        current = self.get(rt, ns, name)
        obj = self._body(rt, body, fields)
        meta = obj["metadata"]
        if meta.get("name", name) != name:
            raise bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on "
                f"the URL ({name})"
            )
        meta["name"] = name
        self._place(rt, ns, meta)
        return self.replace(rt, current, obj, subresource=subresource, dry_run=dry_run)

    def replace(
        self,
        rt: ResourceType,
        current: Stored,
        obj: Obj,
        *,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Stored:
        """Write `obj` over `current`, keeping what clients may not change."""
        old = current.obj
        meta = obj["metadata"]
        name = old["metadata"]["name"]
        wanted_rv = meta.get("resourceVersion")
        if wanted_rv not in (None, "") and str(wanted_rv) != old["metadata"]["resourceVersion"]:
            raise conflict(
                rt.plural,
                rt.group,
                name,
                STALE,
            )
        if subresource == "status":
            obj = self._status_write(old, obj)
            meta = obj["metadata"]
        else:
            self._spec_write(rt, old, obj, dry_run)
        self._rules(rt, obj, old)
        if "generation" in old["metadata"]:
            meta["generation"] = old["metadata"]["generation"]
            if _spec_of(rt, obj) != _spec_of(rt, old):
                meta["generation"] += 1
        else:
            meta.pop("generation", None)
        if rt.storage_key == CRD_KEY:
            obj["status"] = crds.accepted_status(obj, self.now())
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if obj == old:
            return current  # a no-op write changes nothing, not even resourceVersion
        if old["metadata"].get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(old["metadata"].get("finalizers") or [])
            if added:
                raise invalid(
                    rt.kind,
                    rt.group,
                    name,
                    [
                        (
                            "metadata.finalizers",
                            "Forbidden: no new finalizers can be added if the object is being "
                            "deleted",
                        )
                    ],
                )
        if dry_run:
            return Stored(obj, current.rv)
        meta["resourceVersion"] = str(self.store.next_rv())
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not self._graceful(rt, obj)
        ):
            gone = self.store.remove(
                rt.storage_key, meta.get("namespace", ""), name, int(meta["resourceVersion"])
            )
            assert gone is not None
            self._after_remove(rt, gone)
            return gone
        stored = self.store.put(rt.storage_key, obj)
        self._after_write(rt, stored)
        return stored

    def _status_write(self, old: Obj, obj: Obj) -> Obj:
        """A write through the status subresource changes the status only."""
        new: Obj = thaw(old)
        if "status" in obj:
            new["status"] = obj["status"]
        else:
            new.pop("status", None)
        return new

    def _spec_write(self, rt: ResourceType, old: Obj, obj: Obj, dry_run: bool) -> None:
        """A main-resource write keeps what clients may not change, then is admitted and
        validated (with a status subresource, the stored status is kept)."""
        meta = obj["metadata"]
        for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
            else:
                meta.pop(key, None)
        meta.pop("managedFields", None)
        if rt.builtin and rt.group == "apps" and rt.plural == "deployments":
            defaults.deployment(obj)  # the API server defaults on every write
        if rt.storage_key == "pods":
            requests_from_limits(obj.get("spec") or {})  # decoding defaults every write
        if rt.status_subresource:
            if "status" in old:
                obj["status"] = copy.deepcopy(old["status"])
            else:
                obj.pop("status", None)
        with admitting.request(dry_run, None):
            for admit in self.admission:
                admit(rt, old, obj)
            self._check_update(rt, old, obj)
            self._validate(rt, obj)
            for admit in self.validating:
                admit(rt, old, obj)

    def _rules(self, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        """The CRD's CEL rules (``schema.cel.rules``), on every write of a custom object, its status
        included, as kube-apiserver runs them after the schema's own validation."""
        if rt.builtin or not rt.schema:
            return
        causes = rules.validate(rt.schema, obj, old)
        if causes:
            raise invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), causes)

    def _graceful(self, rt: ResourceType, obj: Obj) -> bool:
        """A pod still inside its grace period stays until the kubelet (or grace 0) ends it."""
        return (
            rt.storage_key == "pods"
            and int(obj["metadata"].get("deletionGracePeriodSeconds") or 0) > 0
        )

    def _validate(self, rt: ResourceType, obj: Obj) -> None:
        causes = validation.metadata_causes(obj["metadata"])
        if rt.builtin and rt.group == "" and rt.plural == "pods":
            causes += validation.pod_causes(obj)
        elif rt.builtin and rt.group == "" and rt.plural == "services":
            causes += validation.service_causes(obj)
        elif rt.builtin and rt.group == "batch" and rt.plural == "jobs":
            causes += jobs.job_causes(obj)
        elif rt.builtin and rt.group == "" and rt.plural == "resourcequotas":
            causes += quotas.quota_causes(obj)
        elif rt.builtin and rt.group == "" and rt.plural == "limitranges":
            causes += limitranges.limit_range_causes(obj)
        elif rt.builtin and rt.group == "policy" and rt.plural == "poddisruptionbudgets":
            causes += budgets.budget_causes(obj)
        elif rt.builtin and rt.group == rbacbindings.GROUP and rt.plural.endswith("bindings"):
            causes += rbacbindings.binding_causes(rt.plural, obj)
        elif rt.builtin and rt.group == "apps" and rt.plural in ("deployments", "replicasets"):
            causes += workloads.workload_causes(rt.plural, obj)
        if causes:
            raise invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), causes)

    def _check_update(self, rt: ResourceType, old: Obj, new: Obj) -> None:
        if rt.storage_key == "pods":
            name = old["metadata"]["name"]
            before, after = (
                defaults.mutable_pod_spec(old.get("spec") or {}),
                defaults.mutable_pod_spec(new.get("spec") or {}),
            )
            if before != after:
                raise invalid(
                    rt.kind,
                    rt.group,
                    name,
                    [
                        (
                            "spec",
                            POD_UPDATE_FORBIDDEN,
                        )
                    ],
                )
        found = _update_causes(rt, old, new) if rt.builtin else []
        if found:
            raise invalid(rt.kind, rt.group, old["metadata"]["name"], found)
        if rt.storage_key == CRD_KEY:
            found = crds.problems(new)
            if found:
                raise invalid(rt.kind, rt.group, old["metadata"]["name"], found)

    # patch -----------------------------------------------------------------------------------
    def patch(
        self,
        rt: ResourceType,
        ns: str | None,
        name: str,
        content_type: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
        force: bool = False,
        fields: structural.FieldValidation | None = None,
    ) -> Stored:
        """Apply one of the four patch types; `force` (server-side apply) is accepted and has
        no effect, since this server tracks no field ownership and so raises no conflicts."""
        if content_type == patches.STRATEGIC_PATCH and not rt.builtin:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{patches.JSON_PATCH}, {patches.MERGE_PATCH}, {patches.APPLY_PATCH}",
            )
        if content_type == patches.APPLY_PATCH:
            existing = self.store.get(rt.storage_key, ns or "", name)
            if existing is None:
                if subresource:
                    raise not_found(rt.plural, rt.group, name)
                if not isinstance(body, dict):
                    raise bad_request("apply patch must be an object")
                meta = body.setdefault("metadata", {})
                if meta.get("name", name) != name:
                    raise bad_request("the name of the object does not match the name on the URL")
                meta["name"] = name
                return self.create(rt, ns, body, dry_run=dry_run, fields=fields)
        current = self.get(rt, ns, name)
        doc = thaw(self.view(rt, current))
        if content_type == patches.JSON_PATCH:
            result = patches.json_patch(doc, body)
        elif content_type == patches.MERGE_PATCH:
            result = patches.merge_patch(doc, body)
        elif content_type == patches.STRATEGIC_PATCH:
            result = patches.strategic_merge(doc, body)
        elif content_type == patches.APPLY_PATCH:
            if isinstance(body, dict):
                # Server-side apply approximated as a merge; a stale resourceVersion in an
                # applied config is ignored unless it is set, as with real apply.
                body = {**body}
                body.get("metadata", {}).pop("managedFields", None)
            result = (patches.strategic_merge if rt.builtin else patches.merge_patch)(doc, body)
        else:
            raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {content_type!r}")
        if not isinstance(result, dict):
            raise bad_request("patch must leave an object")
        obj = self._body(rt, result, fields)
        obj["metadata"]["name"] = name
        self._place(rt, ns, obj["metadata"])
        body_rv = _patched_rv(body, content_type)
        if body_rv is None:
            obj["metadata"]["resourceVersion"] = current.obj["metadata"]["resourceVersion"]
        return self.replace(rt, current, obj, subresource=subresource, dry_run=dry_run)

    # delete ----------------------------------------------------------------------------------
    def delete(
        self,
        rt: ResourceType,
        ns: str | None,
        name: str,
        options: dict[str, Any] | None = None,
        *,
        dry_run: bool = False,
    ) -> tuple[Stored, bool]:
        """Delete or start deleting; returns the final object and whether it is gone now."""
        options = options or {}
        current = self.get(rt, ns, name)
        failure = deletion.precondition_failure(current.obj["metadata"], options)
        if failure:
            raise conflict(rt.plural, rt.group, name, failure)
        if rt.storage_key == NS_KEY and name in UNDELETABLE_NAMESPACES:
            raise ApiError(
                403,
                "Forbidden",
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                details={"name": name, "kind": "namespaces"},
            )
        decision = deletion.decide(
            current.obj,
            options,
            self.clock(),
            is_pod=rt.storage_key == "pods",
            is_namespace=rt.storage_key == NS_KEY,
        )
        if decision.outcome is deletion.Outcome.KEEP:
            return current, False
        if decision.outcome is deletion.Outcome.REMOVE:
            return self._remove(rt, current, dry_run), True
        obj = decision.marked
        assert obj is not None
        if dry_run:
            return Stored(obj, current.rv), False
        obj["metadata"]["resourceVersion"] = str(self.store.next_rv())
        stored = self.store.put(rt.storage_key, obj)
        self._after_write(rt, stored)
        return stored, False

    def _remove(self, rt: ResourceType, current: Stored, dry_run: bool) -> Stored:
        if dry_run:
            return current
        meta = current.obj["metadata"]
        gone = self.store.remove(
            rt.storage_key, meta.get("namespace", ""), meta["name"], self.store.next_rv()
        )
        assert gone is not None
        self._after_remove(rt, gone)
        return gone

    # consequences ----------------------------------------------------------------------------
    def _after_write(self, rt: ResourceType, stored: Stored) -> None:
        if rt.storage_key == CRD_KEY:
            self._serve_crd(stored.obj)
        elif rt.storage_key == NS_KEY and stored.obj["metadata"].get("deletionTimestamp"):
            self._finalize_namespace(stored.obj["metadata"]["name"])

    def _after_remove(self, rt: ResourceType, gone: Stored) -> None:
        if rt.storage_key == CRD_KEY:
            spec = gone.obj.get("spec") or {}
            group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
            self.registry.remove_group_resource(group, plural)
            self.store.drop_key(f"{plural}.{group}")
        ns = gone.obj["metadata"].get("namespace")
        if ns:
            parent = self.store.get(NS_KEY, "", ns)
            if parent is not None and parent.obj["metadata"].get("deletionTimestamp"):
                self._maybe_remove_namespace(ns)

    def _serve_crd(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        self.registry.remove_group_resource(group, plural)
        storage = [v.get("name") for v in spec.get("versions") or [] if v.get("storage")]
        for rt in crds.resource_types(crd):
            self.registry.add(rt)
            if rt.version in storage and rt.schema:
                self.store.reshape(
                    rt.storage_key, functools.partial(structural.prune, schema=rt.schema)
                )

    def _finalize_namespace(self, ns: str) -> None:
        """Delete the namespace's content (pods gracefully, finalizers honoured), then it."""
        seen: set[str] = set()
        for rt in self.registry:
            if not rt.namespaced or rt.storage_key in seen:
                continue
            seen.add(rt.storage_key)
            for stored in list(self.store.iter(rt.storage_key, ns)):
                if not stored.obj["metadata"].get("deletionTimestamp"):
                    self.delete(rt, ns, stored.obj["metadata"]["name"])
        self._maybe_remove_namespace(ns)

    def _maybe_remove_namespace(self, ns: str) -> None:
        for rt in self.registry:
            if rt.namespaced and next(iter(self.store.iter(rt.storage_key, ns)), None) is not None:
                return
        current = self.store.get(NS_KEY, "", ns)
        if current is None:
            return
        gone = self.store.remove(NS_KEY, "", ns, self.store.next_rv())
        assert gone is not None

    # pods/binding ----------------------------------------------------------------------------
    def bind(self, ns: str, name: str, body: Any) -> None:
        rt = self._type("", "pods")
        current = self.get(rt, ns, name)
        target = (body or {}).get("target") or {}
        node = target.get("name")
        if not node:
            raise invalid("Binding", "", name, [("target.name", "Required value")])
        spec = current.obj.get("spec") or {}
        if spec.get("nodeName"):
            raise conflict(
                rt.plural, "", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
            )
        if current.obj["metadata"].get("deletionTimestamp"):
            raise conflict(
                rt.plural, "", name, "pod is being deleted, cannot be assigned to a host"
            )
        obj = thaw(current.obj)
        obj["spec"]["nodeName"] = node
        status = obj.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": self.now(),
            }
        )
        status["conditions"] = conditions
        obj["metadata"]["resourceVersion"] = str(self.store.next_rv())
        self.store.put(rt.storage_key, obj)


def _update_causes(rt: ResourceType, old: Obj, new: Obj) -> list[tuple[str, str]]:
    """What a built-in kind's update validation refuses beyond its create validation
    (fields fixed once stored), by kind."""
    key = rt.storage_key
    if key in ("configmaps", "secrets"):
        return configdata.update_causes(key, old, new)
    if rt.group == rbacbindings.GROUP and rt.plural.endswith("bindings"):
        return rbacbindings.binding_update_causes(old, new)
    if key == "deployments.apps":
        return workloads.deployment_update_causes(old, new)
    if key == "resourcequotas":
        return quotas.quota_update_causes(old, new)
    if key == "jobs.batch":
        return jobs.job_update_causes(old, new)
    return []


def _spec_of(rt: ResourceType, obj: Obj) -> Obj:
    skip = {"metadata", "apiVersion", "kind"}
    if rt.status_subresource:
        skip.add("status")
    return {k: v for k, v in obj.items() if k not in skip}


def _patched_rv(body: Any, content_type: str) -> str | None:
    if content_type == patches.JSON_PATCH:
        for op in body if isinstance(body, list) else []:
            if (
                isinstance(op, dict)
                and op.get("path") == "/metadata/resourceVersion"
                and op.get("op") in ("add", "replace")
            ):
                return str(op.get("value"))
        return None
    if isinstance(body, dict):
        rv = (body.get("metadata") or {}).get("resourceVersion")
        return None if rv in (None, "") else str(rv)
    return None
