"""kube-controller-manager's part of the dev cluster: workload controllers, garbage collectors
and the node lifecycle, each acting only through the API (docs/design.md §8)."""
