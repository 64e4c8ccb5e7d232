"""Admission the real server does for ServiceAccounts and RBAC, run by `Objects` on every
create and update before the object is stored:

- a pod without `spec.serviceAccountName` runs as `default`, and a pod whose ServiceAccount
  does not exist is refused (the ServiceAccount admission plugin; `serviceAccount`, the
  deprecated alias, is kept equal);
- RBAC escalation prevention (kube's rbac registry): creating or updating a Role or
  ClusterRole is refused unless the writer already holds every permission it grants (in the
  Role's namespace, or cluster-wide for a ClusterRole) or may `escalate` roles/clusterroles;
  a RoleBinding or ClusterRoleBinding is refused unless the writer holds every permission of
  the role it points at or may `bind` that role. system:masters bypasses both. An update
  that changes only ownerReferences or finalizers (what a garbage collector writes) is not
  checked. (That a binding's roleRef cannot change is validation:
  ``registry/strategies/rbacbindings.py``.)
- a patch (server-side apply) that creates its object needs `create` as well.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

from devkube.server.auth.escalation import escalation_message, missing
from devkube.server.auth.identity import current_request, current_user
from devkube.server.auth.rbac import GROUP, Authorizer, Rule, forbidden_error
from devkube.server.auth.requestinfo import Attributes
from devkube.server.errors import ApiError
from devkube.server.registry.resources import ResourceType
from devkube.server.registry.store import Store
from kubefacts.objects import Obj

Admission = Callable[[ResourceType, "Obj | None", Obj], None]
_GC_FIELDS = ("ownerReferences", "finalizers", "resourceVersion", "managedFields", "generation")


def service_accounts(store: Store) -> Admission:
    def check(rt: ResourceType, old: Obj | None, new: Obj) -> None:
        if old is not None or not rt.builtin or rt.group or rt.plural != "pods":
            return
        spec = new.setdefault("spec", {})
        if not isinstance(spec, dict):
            return
        name = str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "default")
        spec["serviceAccountName"] = name
        spec["serviceAccount"] = name
        meta = new.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        if store.get("serviceaccounts", namespace, name) is None:
            # kube names the pod by its generateName when it has one (not generated yet there).
            pod = str(meta.get("generateName") or meta.get("name") or "")
            raise forbidden_error(
                "pods",
                "",
                pod,
                f"error looking up service account {namespace}/{name}: "
                f'serviceaccount "{name}" not found',
            )

    return check


def create_on_update(authorizer: Authorizer) -> Admission:
    """A patch (server-side apply) that creates the object needs `create` too, as in kube."""

    def check(rt: ResourceType, old: Obj | None, new: Obj) -> None:
        user, attrs = current_user.get(), current_request.get()
        if old is not None or user is None or not isinstance(attrs, Attributes):
            return
        if attrs.verb not in ("patch", "update"):
            return
        create = dataclasses.replace(attrs, verb="create")
        allowed, reason = authorizer.authorize(user, create)
        if not allowed:
            raise forbidden_error(attrs.resource, attrs.api_group, attrs.name, reason)

    return check


def _only_gc_fields_changed(old: Obj, new: Obj) -> bool:
    def strip(obj: Obj) -> str:
        copy = dict(obj)
        copy["metadata"] = {
            k: v for k, v in (obj.get("metadata") or {}).items() if k not in _GC_FIELDS
        }
        return json.dumps(copy, sort_keys=True)

    return strip(old) == strip(new)


def rbac_escalation(authorizer: Authorizer) -> Admission:
    def check(rt: ResourceType, old: Obj | None, new: Obj) -> None:
        if rt.group != GROUP:
            return
        kind = rt.plural
        meta = new.get("metadata") or {}
        name, ns = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        user = current_user.get()
        if user is None or user.privileged:
            return
        if old is not None and _only_gc_fields_changed(old, new):
            return
        if kind in ("roles", "clusterroles"):
            # The request's own name: empty on create (a POST to the collection), as in kube.
            escalate = Attributes(
                verb="escalate",
                resource_request=True,
                api_group=GROUP,
                resource=kind,
                namespace=ns,
                name=name if old is not None else "",
            )
            if authorizer.authorize(user, escalate)[0]:
                return
            requested = [Rule.parse(r) for r in new.get("rules") or [] if isinstance(r, dict)]
        else:
            ref = new.get("roleRef") or {}
            role_kind = ref.get("kind")
            bind = Attributes(
                verb="bind",
                resource_request=True,
                api_group=GROUP,
                resource="clusterroles" if role_kind == "ClusterRole" else "roles",
                namespace=ns,
                name=str(ref.get("name") or ""),
            )
            if authorizer.authorize(user, bind)[0]:
                return
            rules = authorizer.role_rules(ref, ns)
            if isinstance(rules, str):
                singular = "clusterrole" if role_kind == "ClusterRole" else "role"
                raise ApiError(
                    404,
                    "NotFound",
                    rules,
                    details={"name": str(ref.get("name") or ""), "group": GROUP, "kind": singular},
                )
            requested = list(rules)
        held = authorizer.resolve(user, ns)
        lacking = missing((rule for rule, _ in held.rules), requested)
        if lacking:
            text = escalation_message(user, lacking, held.errors)
            raise forbidden_error(kind, GROUP, name, text)

    return check
