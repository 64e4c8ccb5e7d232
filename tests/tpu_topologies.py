"""The TPU topology table of docs/design.md §9.2, written out independently of the code.

Tests check both our slice arithmetic and Ray's against it, so it lives apart from both.
"""

from __future__ import annotations

GKE = {
    "v4": "tpu-v4-podslice",
    "v5e": "tpu-v5-lite-podslice",
    "v5p": "tpu-v5p-slice",
    "v6e": "tpu-v6e-slice",
    "tpu7x": "tpu7x",
}

# (generation, topology, chips per host, hosts per slice).
TABLE = [
    *[
        (g, t, 4, h)
        for g in ("v4", "v5p", "tpu7x")
        for t, h in [("2x2x1", 1), ("2x2x2", 2), ("2x2x4", 4), ("2x4x4", 8), ("4x4x4", 16)]
    ],
    *[
        (g, t, c, h)
        for g in ("v5e", "v6e")
        for t, c, h in [
            ("1x1", 1, 1),
            ("2x2", 4, 1),
            ("2x4", 8, 1),
            ("2x4", 4, 2),
            ("4x4", 4, 4),
            ("4x8", 4, 8),
            ("8x8", 4, 16),
            ("8x16", 4, 32),
            ("16x16", 4, 64),
        ]
    ],
]
