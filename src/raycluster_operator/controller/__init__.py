"""controller layer: the runtime that turns plans into API calls.

informer/store (caches), workqueue + ratelimit (scheduling), expectations + writer (safe
writes), reconciler (one cluster, one pass), leader/events/metrics/probes/logs, and manager,
which wires them; install holds the operator's own RBAC and Deployment.
"""
