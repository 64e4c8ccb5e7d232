"""The dev API server's admission plugins: ServiceAccounts, RBAC escalation, default
tolerations, LimitRange, Pod Security, ResourceQuota, and the eviction subresource's budget
check (docs/design.md §8, "Admission" and "Shared-cluster admission")."""
