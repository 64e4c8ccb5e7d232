"""Add-ons that are not Kubernetes itself (simulated vendor drivers and the like), kept apart
from the core so the core never depends on them (docs/design.md §8)."""
