"""Kept import path: the kubectl helpers live in harness/kubectl.py."""

from harness.kubectl import Run, kubectl_binary, run_kubectl, runner

__all__ = ["Run", "kubectl_binary", "run_kubectl", "runner"]
