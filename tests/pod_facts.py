"""Kept import path: the pod readers live in harness/pods.py."""

from harness.pods import is_ready, labels

__all__ = ["is_ready", "labels"]
