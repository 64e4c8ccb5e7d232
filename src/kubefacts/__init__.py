"""Small, pure facts of the Kubernetes API that both packages of this repository need.

The operator (``raycluster_operator``) and the dev cluster (``devkube``) are independent: neither
imports the other. What both must read or write the same way as the real API server —
resource quantities, timestamps, the alphabet of generated name suffixes — lives here once.
This package imports nothing but the standard library.
"""

from kubefacts.names import SUFFIX_ALPHABET, random_suffix
from kubefacts.quantities import parse_quantity
from kubefacts.timestamps import micro_time, now_rfc3339, parse_time, rfc3339

__all__ = [
    "SUFFIX_ALPHABET",
    "micro_time",
    "now_rfc3339",
    "parse_quantity",
    "parse_time",
    "random_suffix",
    "rfc3339",
]
