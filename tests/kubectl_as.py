"""Kept import path: kubectl as a ServiceAccount lives in harness/kubectl.py."""

from harness.kubectl import Run, as_service_account, ok, refused, runner, user_of

__all__ = ["Run", "as_service_account", "ok", "refused", "runner", "user_of"]
