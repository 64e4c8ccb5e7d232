"""Structural validation of a RayCluster: every problem at once, each with a KubeRay field path.

A user fixing a manifest wants the whole list in one go, so nothing here stops at the first
problem, and nothing raises: the same list becomes the `plan` command's output, the status
condition and the Warning Event.

Names that would only be *too long once combined* (``<cluster>-headless``, a hostname
``<group>-<r>-<h>``) are not problems: :mod:`raycluster_operator.api.names` shortens them
deterministically. Only names that cannot be used at all are problems.

Decided and kept on purpose: a pod template whose ``metadata.namespace`` differs from the
cluster's is **not** a problem. KubeRay accepts such a RayCluster and creates the pods in the
cluster's namespace; the builders do the same, so every cluster KubeRay runs also runs here.

Accelerator-specific checks (TPU topology against numOfHosts) live one layer up, in
``raycluster_operator.accelerators``, because they need the accelerator tables.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from raycluster_operator.api.models import API_VERSION, INT32_MAX, KIND, RayCluster, load_cluster
from raycluster_operator.api.names import DNS_LABEL_MAX
from raycluster_operator.api.problems import Problem

#: The most hosts one slice may have. The largest TPU slices have about 2300 hosts and NVLink
#: domains far fewer; every pod of a slice carries all N hostnames in its env, so a slice costs
#: O(N^2) bytes and the CRD's int32 bound (accepted at admission) would exhaust the operator.
MAX_HOSTS_PER_SLICE = 4096

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_MESSAGES = {
    "missing": "is required",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "list_type": "must be a list",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be a whole number",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
}


def field_path(loc: Sequence[int | str]) -> str:
    """``("spec", "workerGroupSpecs", 1, "numOfHosts")`` -> ``spec.workerGroupSpecs[1].numOfHosts``.

    Map keys that are not identifiers (``ray.io/x``, ``num-cpus``) are bracketed and quoted so
    the path stays unambiguous.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


def parse_cluster(obj: object) -> tuple[RayCluster | None, list[Problem]]:
    """Read a RayCluster from JSON-like data; never raises.

    Returns the model whenever the data can be read (problems then only name a wrong
    ``apiVersion``/``kind``), or ``None`` and one problem per unreadable field plus the
    structural problems of the rest (read without those fields). For a readable cluster,
    structural rules are :func:`validate_structure`'s job, so callers run it next and nothing
    is reported twice.
    """
    if not isinstance(obj, Mapping):
        return None, [Problem("", f"a RayCluster must be an object, not {type(obj).__name__}")]
    problems: list[Problem] = []
    api_version = obj.get("apiVersion")
    if api_version is not None and api_version != API_VERSION:
        problems.append(Problem("apiVersion", f"must be {API_VERSION!r}, not {api_version!r}"))
    kind = obj.get("kind")
    if kind is not None and kind != KIND:
        problems.append(Problem("kind", f"must be {KIND!r}, not {kind!r}"))
    try:
        cluster = load_cluster(dict(obj))
    except ValidationError as err:
        unreadable = _unreadable(err)
        problems += unreadable
        # The rest of the spec is still checked, so one answer lists every problem: a
        # wrong type in one field does not hide a bad value in another.
        rest = _without_unreadable(obj, err)
        if rest is not None:
            # A dropped field reads as its default: what that default lacks is not news.
            seen = tuple(p.path for p in unreadable)
            problems += [p for p in validate_structure(rest) if not _under(p.path, seen)]
        return None, sorted(set(problems))
    return cluster, problems


def _unreadable(err: ValidationError) -> list[Problem]:
    return [
        Problem(field_path(item["loc"]), _MESSAGES.get(item["type"], item["msg"]))
        for item in err.errors()
    ]


def _under(path: str, fields: Sequence[str]) -> bool:
    return any(path == f or path.startswith((f"{f}.", f"{f}[")) for f in fields)


#: Rounds of dropping unreadable fields before giving up: a drop can only surface errors in
#: what it uncovers, which a RayCluster nests a few levels deep at most.
_REPAIR_ROUNDS = 8


def _without_unreadable(obj: Mapping[str, Any], err: ValidationError) -> RayCluster | None:
    """The cluster read without its unreadable fields (each then takes its default), or None
    when that is not possible: a required field is missing or wrong, or a bad value sits in
    a list, whose other items would change place if it were dropped."""
    data: Any = _copy(obj)
    for _ in range(_REPAIR_ROUNDS):
        for item in err.errors():
            loc = item["loc"]
            if item["type"] == "missing" or not loc or isinstance(loc[-1], int):
                return None
            parent = _at(data, loc[:-1])
            if not isinstance(parent, dict) or loc[-1] not in parent:
                return None
            del parent[loc[-1]]
        try:
            return load_cluster(data)
        except ValidationError as again:
            err = again
    return None


def _at(data: Any, loc: Sequence[int | str]) -> Any:
    for part in loc:
        if isinstance(part, int) and isinstance(data, list) and 0 <= part < len(data):
            data = data[part]
        elif isinstance(part, str) and isinstance(data, dict):
            data = data.get(part)
        else:
            return None
    return data


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def validate_structure(cluster: RayCluster) -> list[Problem]:
    """Every structural problem of ``cluster``, in field order."""
    problems = _cluster_name_problems(cluster.metadata.name)
    head = cluster.spec.head_group_spec
    problems += _template_problems(head.template, "spec.headGroupSpec.template")
    groups = cluster.spec.worker_group_specs
    counts = Counter(g.group_name for g in groups)
    for i, group in enumerate(groups):
        path = f"spec.workerGroupSpecs[{i}]"
        problems += _group_name_problems(group.group_name, f"{path}.groupName")
        if counts[group.group_name] > 1:
            problems.append(
                Problem(
                    f"{path}.groupName",
                    f"group name {group.group_name!r} is used by {counts[group.group_name]} "
                    "worker groups; each group needs its own name",
                )
            )
        problems += _count_problems(
            path,
            {
                "replicas": group.replicas,
                "minReplicas": group.min_replicas,
                "maxReplicas": group.max_replicas,
                "idleTimeoutSeconds": group.idle_timeout_seconds,
            },
        )
        if group.num_of_hosts < 1:
            problems.append(
                Problem(
                    f"{path}.numOfHosts",
                    f"must be at least 1 (it is {group.num_of_hosts}); "
                    "it counts the hosts of one slice",
                )
            )
        elif group.num_of_hosts > MAX_HOSTS_PER_SLICE:
            problems.append(
                Problem(
                    f"{path}.numOfHosts",
                    f"must be at most {MAX_HOSTS_PER_SLICE} (it is {group.num_of_hosts}); "
                    "no accelerator domain has more hosts",
                )
            )
        low, high = group.min_replicas or 0, group.max_replicas
        if high is not None and 0 <= high < low:
            problems.append(
                Problem(
                    f"{path}.minReplicas",
                    f"minReplicas ({low}) is greater than maxReplicas ({high}); "
                    "lower minReplicas or raise maxReplicas",
                )
            )
        problems += _template_problems(group.template, f"{path}.template")
        if group.num_of_hosts > 1:
            problems += _owned_pod_fields(group.template, f"{path}.template")
    return problems


def _cluster_name_problems(name: str) -> list[Problem]:
    if not name:
        return [Problem("metadata.name", "is required")]
    if len(name) > DNS_LABEL_MAX:
        return [
            Problem(
                "metadata.name",
                f"is {len(name)} characters; a cluster name is a label value and must be at "
                f"most {DNS_LABEL_MAX}",
            )
        ]
    if not _DNS1035_LABEL.match(name):
        return [
            Problem(
                "metadata.name",
                f"{name!r} is not a valid cluster name: use lowercase letters, digits and '-', "
                "starting with a letter and ending with a letter or digit (it names Services)",
            )
        ]
    return []


def _group_name_problems(name: str, path: str) -> list[Problem]:
    if not name:
        return [Problem(path, "must not be empty")]
    if len(name) > DNS_LABEL_MAX:
        return [
            Problem(
                path,
                f"is {len(name)} characters; a group name is a label value and must be at "
                f"most {DNS_LABEL_MAX}",
            )
        ]
    if not _DNS1123_LABEL.match(name):
        return [
            Problem(
                path,
                f"{name!r} is not a valid group name: use lowercase letters, digits and '-', "
                "starting and ending with a letter or digit (it becomes part of hostnames)",
            )
        ]
    return []


def _count_problems(path: str, counts: Mapping[str, int | None]) -> list[Problem]:
    problems = []
    for field, value in counts.items():
        if value is None:
            continue
        if value < 0:
            problems.append(Problem(f"{path}.{field}", f"must not be negative (it is {value})"))
        elif value > INT32_MAX:
            problems.append(
                Problem(f"{path}.{field}", f"must be at most {INT32_MAX} (a 32-bit integer)")
            )
    return problems


def _template_problems(template: Mapping[str, Any], path: str) -> list[Problem]:
    metadata = template.get("metadata")
    problems = []
    if metadata is not None and not isinstance(metadata, Mapping):
        problems.append(Problem(f"{path}.metadata", "must be an object"))
    spec = template.get("spec")
    if not isinstance(spec, Mapping):
        what = "is required" if spec is None else "must be an object"
        return [*problems, Problem(f"{path}.spec", f"{what}: a pod template needs containers")]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [
            *problems,
            Problem(
                f"{path}.spec.containers",
                "needs at least one container; the first one runs Ray",
            ),
        ]
    problems += _shape_problems(spec, f"{path}.spec", _POD_SPEC_SHAPES)
    names: Counter[str] = Counter()
    for i, container in enumerate(containers):
        cpath = f"{path}.spec.containers[{i}]"
        if not isinstance(container, Mapping):
            problems.append(Problem(cpath, "must be an object"))
            continue
        problems += _shape_problems(container, cpath, _CONTAINER_SHAPES)
        name = container.get("name")
        if not isinstance(name, str) or not name:
            problems.append(Problem(f"{cpath}.name", "is required"))
        else:
            names[name] += 1
            if names[name] == 2:
                problems.append(Problem(f"{cpath}.name", f"container name {name!r} is repeated"))
        image = container.get("image")
        if not isinstance(image, str) or not image:
            problems.append(Problem(f"{cpath}.image", "is required"))
    return problems


# The pod template is stored unvalidated (the CRD preserves it as written); the fields the
# operator reads or extends must have the shape Kubernetes would insist on at pod creation.
_POD_SPEC_SHAPES: dict[str, type] = {
    "volumes": list,
    "initContainers": list,
    "affinity": dict,
    "nodeSelector": dict,
    "hostname": str,
    "subdomain": str,
    "serviceAccountName": str,
    "restartPolicy": str,
}
_CONTAINER_SHAPES: dict[str, type] = {
    "env": list,
    "ports": list,
    "volumeMounts": list,
    "command": list,
    "args": list,
    "resources": dict,
}
_SHAPE_NAMES: dict[type, str] = {list: "a list", dict: "an object", str: "a string"}


def _shape_problems(obj: Mapping[str, Any], path: str, shapes: Mapping[str, type]) -> list[Problem]:
    problems = []
    for field, kind in shapes.items():
        value = obj.get(field)
        if value is None:
            continue
        if not isinstance(value, kind):
            problems.append(Problem(f"{path}.{field}", f"must be {_SHAPE_NAMES[kind]}"))
        elif not isinstance(value, list):
            continue
        elif field in ("env", "ports", "volumeMounts", "volumes"):
            problems += [
                Problem(f"{path}.{field}[{i}]", "must be an object")
                for i, item in enumerate(value)
                if not isinstance(item, Mapping)
            ]
        elif field in ("command", "args"):
            problems += [
                Problem(f"{path}.{field}[{i}]", "must be a string")
                for i, item in enumerate(value)
                if not isinstance(item, str)
            ]
    return problems


def _owned_pod_fields(template: Mapping[str, Any], path: str) -> list[Problem]:
    spec = template.get("spec")
    if not isinstance(spec, Mapping):
        return []
    return [
        Problem(
            f"{path}.spec.{field}",
            f"must not be set on a multi-host group: the operator sets {field} on every "
            "host so that the slice's hostnames resolve; remove it",
        )
        for field in ("hostname", "subdomain")
        if spec.get(field) is not None
    ]
