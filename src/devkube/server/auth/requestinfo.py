"""What a request asks to do, read off its URL the way kube-apiserver's RequestInfoFactory does.

Authorization needs (verb, API group, resource, subresource, name, namespace) or, for paths
outside /api and /apis resources, (verb, path). Everything is derived from the URL and the
method alone, before any handler runs, so a route added later (pods/exec, pods/portforward)
is authorized without declaring anything:

- `/api/v1/...` is the core group, `/apis/GROUP/VERSION/...` a named group; shorter paths
  (`/api`, `/apis/GROUP`) and everything else are non-resource requests whose verb is the
  lower-cased HTTP method;
- `namespaces/NS/RESOURCE/...` scopes the request to NS (`namespaces/NS`, `namespaces/NS/status`
  and `namespaces/NS/finalize` name the namespace itself, in namespace NS, as kube does);
- RESOURCE/NAME/SUBRESOURCE; `/watch/` before the resource (the legacy form) makes it a watch;
- GET/HEAD without a name is `list`, or `watch` with `?watch=true`; with a
  `fieldSelector=metadata.name=X` the name is X (so resourceNames can allow a single-object
  list/watch); DELETE without a name is `deletecollection`;
- the streaming pod subresources (exec, attach, portforward) are `create` whatever the method:
  kubectl opens them with a GET that upgrades the connection, which kube authorizes as create.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
#: Subresources whose every method is authorized as `create` (connection upgrades).
CONNECT_SUBRESOURCES = frozenset({"exec", "attach", "portforward"})


@dataclass(frozen=True)
class Attributes:
    """One request as RBAC sees it."""

    verb: str
    resource_request: bool
    path: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""

    @property
    def combined_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1")


def _name_from_field_selector(selector: str | None) -> str:
    if not selector:
        return ""
    for term in selector.split(","):
        key, op, value = term.partition("=")
        if op and key.strip() == "metadata.name":
            value = value.lstrip("=").strip()  # "==" means "=" too
            if value and "/" not in value and value not in (".", ".."):
                return value
    return ""


def attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes:
    parts = [p for p in path.split("/") if p]
    non_resource = Attributes(verb=method.lower(), resource_request=False, path=path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return non_resource
    group = ""
    rest = parts[1:]
    if parts[0] == "apis":
        if len(rest) < 3:
            return non_resource
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    verb = _METHOD_VERBS.get(method.upper(), "")
    by_method = True
    if rest[0] == "watch":
        if len(rest) < 2:
            return non_resource
        verb, rest, by_method = "watch", rest[1:], False
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if by_method and not name and verb == "get":
        verb = "watch" if _truthy(query.get("watch")) else "list"
    if verb in ("list", "watch") and not name:
        name = _name_from_field_selector(query.get("fieldSelector"))
    if by_method and not name and verb == "delete":
        verb = "deletecollection"
    if subresource in CONNECT_SUBRESOURCES and resource == "pods" and group == "":
        verb = "create"
    return Attributes(
        verb=verb,
        resource_request=True,
        path=path,
        api_group=group,
        api_version=version,
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
    )
