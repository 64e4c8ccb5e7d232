"""The dev API server's authentication and authorization: identities, ServiceAccount tokens,
RBAC and its escalation rules, and the review APIs (docs/design.md §8, "Request pipeline")."""
