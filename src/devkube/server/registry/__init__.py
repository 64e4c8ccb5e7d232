"""The dev API server's registry: what a write does to an object (names, generation, deletion,
patches), the store with its one resourceVersion, the served kinds, and per-kind strategies
(kube-apiserver's `registry`; docs/design.md §8)."""
