"""Choosing replica indices for new replicas.

docs/design.md §4, rule 13: the lowest free index, where an index stays taken while *any* pod that
carries it still exists (even terminating), so hostnames ``<group>-<r>-<h>`` and ``TPU_NAME``
never name two slices at once. KubeRay reuses an index as soon as the old pods are
terminating, which lets DNS and TPU_NAME briefly point at two slices.

Every function here is lazy in the number of indices it returns, so that a mistaken
``replicas: 2147483647`` costs one bounded pass, not a list of two billion numbers.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from itertools import count as counting
from itertools import islice


def free_indices(taken: Collection[int], start: int = 0) -> Iterator[int]:
    """Every index from ``start`` up that is not in ``taken``, lowest first."""
    return (i for i in counting(start) if i not in taken)


def lowest_free(taken: Collection[int], count: int, start: int = 0) -> list[int]:
    """The ``count`` lowest indices from ``start`` up that are not in ``taken``."""
    return list(islice(free_indices(taken, start), max(count, 0)))
