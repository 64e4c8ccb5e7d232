"""The process runtime: pods of the dev cluster as real local processes.

Each pod runs in its own mount and PID namespace with a loopback address, a hosts file that
stands in for cluster DNS and the service-account files in-cluster clients look for. It runs
commands; it knows nothing of what they are.
"""

from __future__ import annotations

from raycluster_operator.devcluster.process.sandbox import process_runtime_available

__all__ = ["process_runtime_available"]
