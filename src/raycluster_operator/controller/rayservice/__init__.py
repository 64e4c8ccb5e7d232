"""RayServices on the generic runtime (docs/design.md §12): the reconciler, which is also the
kind's registration, and the client of Ray Serve's REST API and proxies."""
