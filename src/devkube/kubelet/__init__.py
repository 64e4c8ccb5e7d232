"""The kubelet's part of the dev cluster: pods on nodes, their status, heartbeats, logs,
tokens, and the seam to the runtime that runs containers (docs/design.md §8)."""
