"""RBAC (rbac.authorization.k8s.io/v1) as kube-apiserver evaluates it.

A request is allowed when a rule of a role bound to the user allows it: a ClusterRoleBinding
grants its ClusterRole everywhere; a RoleBinding grants its Role, or a ClusterRole, in its own
namespace only. A rule allows a resource request when its verbs, apiGroups, resources
(`pods`, `pods/status`, `*/scale`, `*`) and resourceNames (empty = any) all match, and a
non-resource request when its verbs and nonResourceURLs (exact, `*`, or a `prefix*`) match.
A binding whose role does not exist grants nothing and is reported in the denial's reason.

Bindings are indexed by subject and the rules of one (user, groups, namespace) are resolved
once and cached; any write to a Role, ClusterRole or binding drops both (the store tells us),
so the next request sees it.

Escalation prevention's rule coverage is in escalation.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from devkube.server.auth.identity import UserInfo, service_account_username
from devkube.server.auth.requestinfo import Attributes
from devkube.server.errors import ApiError
from devkube.server.registry.store import Change, Store
from kubefacts.objects import Obj

GROUP = "rbac.authorization.k8s.io"
ROLES = f"roles.{GROUP}"
CLUSTER_ROLES = f"clusterroles.{GROUP}"
ROLE_BINDINGS = f"rolebindings.{GROUP}"
CLUSTER_ROLE_BINDINGS = f"clusterrolebindings.{GROUP}"
RBAC_KEYS = (ROLES, CLUSTER_ROLES, ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS)

SubjectKey = tuple[str, str]  # ("User" | "Group", name); ServiceAccounts become their user


@dataclass(frozen=True)
class Rule:
    """One PolicyRule, with its lists kept in order (for display) and as sets (for matching)."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Rule:
        def strings(key: str) -> tuple[str, ...]:
            value = raw.get(key) or []
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        return cls(
            strings("verbs"),
            strings("apiGroups"),
            strings("resources"),
            strings("resourceNames"),
            strings("nonResourceURLs"),
        )

    def to_json(self) -> Obj:
        out: Obj = {"verbs": list(self.verbs)}
        if self.api_groups:
            out["apiGroups"] = list(self.api_groups)
        if self.resources:
            out["resources"] = list(self.resources)
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        if self.non_resource_urls:
            out["nonResourceURLs"] = list(self.non_resource_urls)
        return out

    def allows(self, attrs: Attributes) -> bool:
        if "*" not in self.verbs and attrs.verb not in self.verbs:
            return False
        if not attrs.resource_request:
            return any(url_matches(url, attrs.path) for url in self.non_resource_urls)
        if "*" not in self.api_groups and attrs.api_group not in self.api_groups:
            return False
        if not _resource_matches(self.resources, attrs.combined_resource, attrs.subresource):
            return False
        return not self.resource_names or attrs.name in self.resource_names

    def compact_string(self) -> str:
        """kube's CompactString: `{APIGroups:["x"], Resources:["y"], Verbs:["get"]}`."""
        parts = []
        for label, values in (
            ("APIGroups", self.api_groups),
            ("Resources", self.resources),
            ("NonResourceURLs", self.non_resource_urls),
            ("ResourceNames", self.resource_names),
            ("Verbs", self.verbs),
        ):
            if values:
                parts.append(f"{label}:{go_quote_list(values)}")
        return "{" + ", ".join(parts) + "}"


def go_quote_list(values: Iterable[str]) -> str:
    """Go's `%q` of a []string: `["a" "b"]`."""
    return "[" + " ".join(go_quote(v) for v in values) + "]"


def go_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def url_matches(rule_url: str, path: str) -> bool:
    if rule_url in ("*", path):
        return True
    return rule_url.endswith("*") and path.startswith(rule_url.rstrip("*"))


def _resource_matches(resources: tuple[str, ...], combined: str, subresource: str) -> bool:
    for resource in resources:
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


@dataclass(frozen=True)
class Resolved:
    """The rules a user holds in one namespace, and the bindings that could not be resolved."""

    rules: tuple[tuple[Rule, str], ...]  # each with "RBAC: allowed by <binding>"
    errors: tuple[str, ...]


def subject_keys(user: UserInfo) -> list[SubjectKey]:
    return [("User", user.name), *(("Group", g) for g in user.groups)]


def _binding_subjects(binding: Obj, namespace: str) -> Iterator[SubjectKey]:
    for subject in binding.get("subjects") or []:
        kind = subject.get("kind")
        name = str(subject.get("name") or "")
        if kind in ("User", "Group"):
            yield kind, name
        elif kind == "ServiceAccount":
            sa_namespace = str(subject.get("namespace") or namespace)
            if sa_namespace:
                yield "User", service_account_username(sa_namespace, name)


class Authorizer:
    """RBAC over the server's own store, indexed and cached (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cluster: dict[SubjectKey, list[Obj]] | None = None
        self._namespaced: dict[str, dict[SubjectKey, list[Obj]]] = {}
        self._resolved: dict[tuple[str, tuple[str, ...], str], Resolved] = {}
        for key in RBAC_KEYS:
            store.on_change(key, self._invalidate)

    def _invalidate(self, change: Change) -> None:
        del change
        self._cluster = None
        self._namespaced = {}
        self._resolved = {}

    def _index(self) -> tuple[dict[SubjectKey, list[Obj]], dict[str, dict[SubjectKey, list[Obj]]]]:
        if self._cluster is None:
            cluster: dict[SubjectKey, list[Obj]] = {}
            for stored in self.store.iter(CLUSTER_ROLE_BINDINGS, None):
                for key in _binding_subjects(stored.obj, ""):
                    cluster.setdefault(key, []).append(stored.obj)
            namespaced: dict[str, dict[SubjectKey, list[Obj]]] = {}
            for stored in self.store.iter(ROLE_BINDINGS, None):
                ns = str(stored.obj["metadata"].get("namespace") or "")
                for key in _binding_subjects(stored.obj, ns):
                    namespaced.setdefault(ns, {}).setdefault(key, []).append(stored.obj)
            self._cluster, self._namespaced = cluster, namespaced
        return self._cluster, self._namespaced

    def bindings_for(self, user: UserInfo, namespace: str) -> list[Obj]:
        """The ClusterRoleBindings, then (in a namespace) the RoleBindings, naming the user."""
        cluster, namespaced = self._index()
        keys = subject_keys(user)
        found: dict[int, Obj] = {}
        for key in keys:
            for binding in cluster.get(key, ()):
                found.setdefault(id(binding), binding)
        if namespace:
            local = namespaced.get(namespace, {})
            for key in keys:
                for binding in local.get(key, ()):
                    found.setdefault(id(binding), binding)
        return list(found.values())

    def role_rules(self, ref: Mapping[str, Any], namespace: str) -> tuple[Rule, ...] | str:
        """The rules a roleRef points at, or why they cannot be had (kube's lister wording)."""
        kind, name = ref.get("kind"), str(ref.get("name") or "")
        if kind == "ClusterRole":
            stored = self.store.get(CLUSTER_ROLES, "", name)
            if stored is None:
                return f'clusterrole.{GROUP} "{name}" not found'
        elif kind == "Role":
            stored = self.store.get(ROLES, namespace, name)
            if stored is None:
                return f'role.{GROUP} "{name}" not found'
        else:
            return f"unsupported role reference kind: {kind!r}"
        return tuple(Rule.parse(r) for r in stored.obj.get("rules") or [])

    def resolve(self, user: UserInfo, namespace: str) -> Resolved:
        key = (user.name, user.groups, namespace)
        cached = self._resolved.get(key)
        if cached is not None:
            return cached
        rules: list[tuple[Rule, str]] = []
        errors: list[str] = []
        for binding in self.bindings_for(user, namespace):
            ns = str(binding["metadata"].get("namespace") or "")
            got = self.role_rules(binding.get("roleRef") or {}, ns)
            if isinstance(got, str):
                errors.append(got)
            else:
                source = f"RBAC: allowed by {_describe(binding, user)}"
                rules.extend((rule, source) for rule in got)
        resolved = Resolved(tuple(rules), tuple(errors))
        self._resolved[key] = resolved
        return resolved

    def authorize(self, user: UserInfo, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason): the binding that allowed it, or the bindings that could not be
        resolved, worded as kube's RBAC authorizer words them."""
        if user.privileged:
            return True, ""
        resolved = self.resolve(user, attrs.namespace)
        for rule, source in resolved.rules:
            if rule.allows(attrs):
                return True, source
        return False, _rbac_reason(resolved.errors)


def _describe(binding: Obj, user: UserInfo) -> str:
    """kube's binding describer: `ClusterRoleBinding "b" of ClusterRole "r" to Group "g"`."""
    meta = binding["metadata"]
    ns = str(meta.get("namespace") or "")
    ref = binding.get("roleRef") or {}
    keys = set(subject_keys(user))
    subject: Obj = next(
        (
            s
            for s in binding.get("subjects") or []
            if any(k in keys for k in _binding_subjects({"subjects": [s]}, ns))
        ),
        {},
    )
    kind, name = str(subject.get("kind") or ""), str(subject.get("name") or "")
    if kind == "ServiceAccount":
        name = f"{name}/{subject.get('namespace') or ns}"
    what = (
        f"RoleBinding {go_quote(meta['name'] + '/' + ns)}"
        if ns
        else f"ClusterRoleBinding {go_quote(meta['name'])}"
    )
    return (
        f"{what} of {ref.get('kind')} {go_quote(str(ref.get('name') or ''))} "
        f"to {kind} {go_quote(name)}"
    )


def _rbac_reason(errors: tuple[str, ...]) -> str:
    if not errors:
        return ""
    if len(errors) == 1:
        return f"RBAC: {errors[0]}"
    return "RBAC: [" + ", ".join(errors) + "]"


# --- messages ------------------------------------------------------------------------------


def qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def forbidden(user: UserInfo, attrs: Attributes, reason: str = "") -> ApiError:
    """kube-apiserver's 403 for a request its authorizer did not allow."""
    who = go_quote(user.name)
    if not attrs.resource_request:
        text = f"User {who} cannot {attrs.verb} path {go_quote(attrs.path)}"
    else:
        what = (
            f"User {who} cannot {attrs.verb} resource {go_quote(attrs.combined_resource)} "
            f"in API group {go_quote(attrs.api_group)}"
        )
        if attrs.namespace:
            text = f"{what} in the namespace {go_quote(attrs.namespace)}"
        else:
            text = f"{what} at the cluster scope"
    if reason:
        text = f"{text}: {reason}"
    return forbidden_error(attrs.resource, attrs.api_group, attrs.name, text)


def forbidden_error(resource: str, group: str, name: str, text: str) -> ApiError:
    """apimachinery's NewForbidden: `<resource.group> "<name>" is forbidden: <text>`."""
    if not resource:
        message = f"forbidden: {text}"
    elif not name:
        message = f"{qualified(resource, group)} is forbidden: {text}"
    else:
        message = f"{qualified(resource, group)} {go_quote(name)} is forbidden: {text}"
    details: Obj = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if resource:
        details["kind"] = resource
    return ApiError(403, "Forbidden", message, details=details)
