"""kube-scheduler's part of the dev cluster: the binding loop and the pure placement
decision (docs/design.md §8)."""
