"""The ClusterRoles and ClusterRoleBindings kube-apiserver creates at start (the subset a
client needs): every authenticated user may read discovery, health and version, and ask what
it may do (`kubectl auth can-i`, `kubectl auth whoami`); `cluster-admin` is bound to
system:masters. Without these a fresh ServiceAccount token could not even run `kubectl get`,
which starts with discovery.
"""

from __future__ import annotations

from devkube.server.auth.identity import AUTHENTICATED, MASTERS
from kubefacts.objects import Obj

_META_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_META_ANNOTATIONS = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
UNAUTHENTICATED = "system:unauthenticated"


def _meta(name: str) -> Obj:
    return {"name": name, "labels": dict(_META_LABELS), "annotations": dict(_META_ANNOTATIONS)}


def _role(name: str, rules: list[Obj]) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": _meta(name),
        "rules": rules,
    }


def _binding(name: str, groups: list[str]) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": _meta(name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in groups
        ],
    }


def cluster_roles() -> list[Obj]:
    return [
        _role(
            "cluster-admin",
            [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        ),
        _role(
            "system:discovery",
            [
                {
                    "nonResourceURLs": [
                        "/api",
                        "/api/*",
                        "/apis",
                        "/apis/*",
                        "/healthz",
                        "/livez",
                        "/openapi",
                        "/openapi/*",
                        "/readyz",
                        "/version",
                        "/version/",
                    ],
                    "verbs": ["get"],
                }
            ],
        ),
        _role(
            "system:basic-user",
            [
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"],
                    "verbs": ["create"],
                },
            ],
        ),
        _role(
            "system:public-info-viewer",
            [
                {
                    "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                    "verbs": ["get"],
                }
            ],
        ),
    ]


def cluster_role_bindings() -> list[Obj]:
    return [
        _binding("cluster-admin", [MASTERS]),
        _binding("system:discovery", [AUTHENTICATED]),
        _binding("system:basic-user", [AUTHENTICATED]),
        _binding("system:public-info-viewer", [AUTHENTICATED, UNAUTHENTICATED]),
    ]
