"""The dev API server's endpoints: the REST handlers, watch, server-side tables, discovery and
OpenAPI, logs and the streaming subresources (kube-apiserver's `endpoints`; docs/design.md §8)."""
