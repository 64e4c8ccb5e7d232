"""Choosing replica indices for new replicas.

DESIGN.md §4 rule 4: the lowest free index, where an index stays taken while *any* pod that
carries it still exists (even terminating), so hostnames ``<group>-<r>-<h>`` and ``TPU_NAME``
never name two slices at once. KubeRay reuses an index as soon as the old pods are
terminating, which lets DNS and TPU_NAME briefly point at two slices.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator


def free_indices(taken: Collection[int]) -> Iterator[int]:
    """Every index not in ``taken``, lowest first."""
    index = 0
    while True:
        if index not in taken:
            yield index
        index += 1


def lowest_free(taken: Collection[int], count: int) -> list[int]:
    """The ``count`` lowest indices not in ``taken``."""
    out: list[int] = []
    if count <= 0:
        return out
    for index in free_indices(taken):
        out.append(index)
        if len(out) == count:
            break
    return out


def free_below(taken: Collection[int], limit: int) -> list[int]:
    """Free indices in ``0..limit-1``: where a dense group still has holes to fill."""
    return [i for i in range(limit) if i not in taken]
