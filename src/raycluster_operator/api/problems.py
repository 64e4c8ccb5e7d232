"""A validation problem: where in the RayCluster, and what the user should change.

Problems are data so that the same list reaches the `plan` command's exit message, the
status condition and the Warning Event without being re-worded on the way.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Problem:
    #: A field path in KubeRay's spelling, e.g. ``spec.workerGroupSpecs[1].numOfHosts``;
    #: empty for the object as a whole.
    path: str
    #: One sentence a user can act on.
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message
