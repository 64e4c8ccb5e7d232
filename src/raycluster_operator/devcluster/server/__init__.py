"""An in-process Kubernetes API server ("envtest in Python") for the dev cluster and tests."""

from __future__ import annotations

from .app import ApiServer
from .errors import ApiError
from .faults import FaultRule, Faults

__all__ = ["ApiError", "ApiServer", "FaultRule", "Faults"]
