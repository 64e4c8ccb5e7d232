"""Which parts of a RayCluster may be acted on (docs/design.md §4, rule 3).

Structure and accelerator rules come from ``accelerators.validate_cluster``; this
module only sorts the problems by blast radius: a problem inside one worker group stops that
group alone, while a problem anywhere else stops the whole cluster, because acting on half an
understood spec is how pods get deleted by mistake.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from raycluster_operator import accelerators
from raycluster_operator.api.models import RayCluster
from raycluster_operator.api.problems import Problem
from raycluster_operator.planning.upgrade import upgrade_problems

_GROUP_PATH = re.compile(r"^spec\.workerGroupSpecs\[(\d+)\]")


@dataclass(frozen=True, slots=True)
class SpecCheck:
    problems: tuple[Problem, ...]
    #: Problems outside any worker group: nothing of the cluster is touched.
    cluster_problems: tuple[Problem, ...]
    #: Positions in ``workerGroupSpecs`` of groups that are left alone this pass.
    invalid_groups: frozenset[int]

    @property
    def ok(self) -> bool:
        return not self.problems


def check_spec(cluster: RayCluster) -> SpecCheck:
    found = [*accelerators.validate_cluster(cluster), *upgrade_problems(cluster)]
    problems = list(dict.fromkeys(found))
    invalid: set[int] = set()
    cluster_level: list[Problem] = []
    for problem in problems:
        match = _GROUP_PATH.match(problem.path)
        if match:
            invalid.add(int(match.group(1)))
        else:
            cluster_level.append(problem)
    return SpecCheck(tuple(problems), tuple(cluster_level), frozenset(invalid))
