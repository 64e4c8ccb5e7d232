"""Where a pod may run: the scheduler's decision as a pure function of pods and nodes.

It honours what the operator relies on for multi-host slices: node selectors, required node
affinity, resource requests (cpu, memory, pods, TPUs, GPUs) and required pod (anti-)affinity
by topology key, including existing pods' anti-affinity against the newcomer. It is
gang-aware in one small way: the first pod of a group with affinity to itself prefers a
topology domain that can hold every pending pod of that group, so a slice does not start in a
pool it cannot finish in.

It is indexed for thousands of nodes and pods (the scale benchmark's 8,000 TPU hosts): node
allocatable is parsed once per node version into integers in kube-scheduler's units
(millicores for cpu, whole units otherwise), bound pods are indexed by label for the affinity
terms, a pod whose required affinity pins a topology domain is checked only against that
domain's nodes, nodes with a requested resource used up are skipped without a check, and the
node-only checks (unschedulable, taints, node selector/affinity) are asked once per pod shape
and pass, and remembered per pod shape and node version across passes (``Memo``). The answer
is the same as checking every node:
when no node is found, every node is checked again the plain way for the reasons.
"""

from __future__ import annotations

import bisect
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from devkube.machinery.nodes import toleration_matches
from devkube.machinery.pods import TERMINAL_PHASES
from devkube.machinery.selectors import (
    label_selector_matches,
    node_selector_term_matches,
)
from kubefacts.objects import Obj
from kubefacts.quantities import parse_quantity


@dataclass(frozen=True)
class Placement:
    """A node name, or None with the reason the scheduler would report."""

    node: str | None
    message: str = ""


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def _labels(obj: Obj) -> Mapping[str, str]:
    labels: Mapping[str, str] = _meta(obj).get("labels") or {}
    return labels


@lru_cache(maxsize=4096)
def amount(resource: str, quantity: str) -> int:
    """A quantity in kube-scheduler's units: millicores for cpu, whole units (rounded up) for
    everything else, as its ``Resource`` counts them (``MilliValue``/``Value``). Integers, not
    fractions: a scheduling pass compares thousands of them per pod."""
    exact = parse_quantity(quantity)
    return math.ceil(exact * 1000) if resource == "cpu" else math.ceil(exact)


def _amounts(resources: Mapping[str, Any]) -> dict[str, int]:
    return {str(k): amount(str(k), str(v)) for k, v in resources.items()}


def pod_requests(pod: Obj) -> dict[str, int]:
    """Effective requests (in ``amount``'s units): per container, requests default to limits;
    init containers run one at a time, so the pod needs the larger of their maximum and the
    containers' sum."""
    spec = pod.get("spec") or {}

    def container_requests(container: Obj) -> dict[str, int]:
        resources = container.get("resources") or {}
        return _amounts({**(resources.get("limits") or {}), **(resources.get("requests") or {})})

    result: dict[str, int] = {}
    for container in spec.get("containers") or []:
        _add(result, container_requests(container))
    for container in spec.get("initContainers") or []:
        for name, value in container_requests(container).items():
            result[name] = max(result.get(name, 0), value)
    _add(result, _amounts(spec.get("overhead") or {}))
    result["pods"] = 1
    # In name order and without zeros: `fits` walks them for every node it checks.
    return {name: wanted for name, wanted in sorted(result.items()) if wanted > 0}


def _add(total: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def node_is_ready(node: Obj) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def untolerated_taint(pod: Obj, node: Obj, requests: Mapping[str, int]) -> Obj | None:
    """The first NoSchedule/NoExecute taint of the node the pod does not tolerate, if any."""
    tolerations = list((pod.get("spec") or {}).get("tolerations") or [])
    # ExtendedResourceToleration: asking for an extended resource tolerates its taint.
    tolerations += [
        {"key": name, "operator": "Exists", "effect": "NoSchedule"}
        for name, amount in requests.items()
        if "/" in name and amount > 0
    ]
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(toleration_matches(t, taint) for t in tolerations):
            found: Obj = taint
            return found
    return None


def _node_affinity_ok(pod: Obj, node: Obj) -> bool:
    spec = pod.get("spec") or {}
    labels = _labels(node)
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if terms is None:
        return True
    name = str(_meta(node).get("name", ""))
    return any(node_selector_term_matches(term, labels, name) for term in terms)


def _term_namespaces(term: Obj, pod: Obj) -> frozenset[str] | None:
    """The namespaces a pod affinity term looks at; None means all (a namespaceSelector,
    whose namespace labels the scheduler does not track)."""
    if term.get("namespaceSelector") is not None:
        return None
    namespaces = term.get("namespaces") or [_meta(pod).get("namespace", "default")]
    return frozenset(namespaces)


def _term_matches_pod(term: Obj, owner: Obj, other: Obj) -> bool:
    """Does `other` match the term declared by `owner`?"""
    namespaces = _term_namespaces(term, owner)
    if namespaces is not None and _meta(other).get("namespace", "default") not in namespaces:
        return False
    return label_selector_matches(term.get("labelSelector"), _labels(other))


def _required_terms(pod: Obj, kind: str) -> Sequence[Obj]:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    terms: Sequence[Obj] = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    return terms


#: What decides that a pod fits no node, when it has no resource claims (`_place`).
_FailureKey = tuple[str, tuple[tuple[str, int], ...], "_AffinityRules"]


@dataclass(frozen=True)
class _Bound:
    pod: Obj
    node: str


@dataclass(frozen=True)
class _AffinityRules:
    # (topology key, allowed values or None for anywhere with the key)
    required: tuple[tuple[str, frozenset[str] | None], ...]
    forbidden: frozenset[tuple[str, str]]  # by the pod's own anti-affinity
    repelled: frozenset[tuple[str, str]]  # by existing pods' anti-affinity

    def why_not(self, labels: Mapping[str, str]) -> str | None:
        for key, allowed in self.required:
            if key not in labels or (allowed is not None and labels[key] not in allowed):
                return "node(s) didn't match pod affinity rules"
        if any(labels.get(key) == value for key, value in self.forbidden):
            return "node(s) didn't match pod anti-affinity rules"
        if any(labels.get(key) == value for key, value in self.repelled):
            return "node(s) didn't satisfy existing pods anti-affinity rules"
        return None


class Memo:
    """What one scheduling pass leaves for the next.

    The node-only checks' answers, by pod shape and node, with the node's resourceVersion:
    pods of one group share tolerations, node selector and node affinity, so a pass over 9,000
    pods asks each node the same question a handful of times, and the answer stands until the
    node changes. And each bound pod's requests, by uid (a pod's resources do not change)."""

    def __init__(self, limit: int = 200_000) -> None:
        self._verdicts: dict[tuple[str, str], tuple[str, str | None]] = {}
        self._requests: dict[str, dict[str, int]] = {}
        self._allocatable: dict[tuple[str, str], dict[str, int]] = {}
        self._limit = limit

    def requests(self, pod: Obj) -> dict[str, int]:
        uid = str(_meta(pod).get("uid") or "")
        if not uid:
            return pod_requests(pod)
        found = self._requests.get(uid)
        if found is None:
            if len(self._requests) >= self._limit:
                self._requests.clear()
            found = self._requests[uid] = pod_requests(pod)
        return found

    def allocatable(self, node: Obj) -> dict[str, int]:
        """The node's allocatable, parsed once per node version (not once per pass)."""
        meta = _meta(node)
        key = (str(meta.get("name")), str(meta.get("resourceVersion", "")))
        found = self._allocatable.get(key)
        if found is None:
            if len(self._allocatable) >= self._limit:
                self._allocatable.clear()
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            found = self._allocatable[key] = _amounts(allocatable)
        return found

    def get(self, shape: str, node: str, version: str) -> tuple[bool, str | None]:
        found = self._verdicts.get((shape, node))
        if found is None or found[0] != version:
            return False, None
        return True, found[1]

    def put(self, shape: str, node: str, version: str, reason: str | None) -> None:
        if len(self._verdicts) >= self._limit:
            self._verdicts.clear()
        self._verdicts[(shape, node)] = (version, reason)


def _shape(pod: Obj, requests: Mapping[str, int]) -> str:
    """What the node-only checks read of a pod."""
    spec = pod.get("spec") or {}
    return json.dumps(
        [
            spec.get("tolerations"),
            spec.get("nodeSelector"),
            (spec.get("affinity") or {}).get("nodeAffinity"),
            sorted(n for n, a in requests.items() if "/" in n and a > 0),
        ],
        sort_keys=True,
    )


def _selector_key(term: Obj) -> tuple[str, str] | None:
    """One label (key, value) every pod matching the term carries, to look candidates up by."""
    match = (term.get("labelSelector") or {}).get("matchLabels") or {}
    for key, value in sorted(match.items()):
        return str(key), str(value)
    return None


class _Domains:
    """For one pod shape, requests and topology key in one pass: the nodes that pass the
    node-only checks and fit the requests, by domain (the key's value), kept current as pods
    are assumed, with the domains in the orders `_prefer_whole_gang` picks them in. A gang's
    first pod then costs a few bisects, not a look at every free node (issue #26: O(nodes)
    per gang, O(N^2) over a convergence)."""

    def __init__(self, world: _World, pod: Obj, requests: Mapping[str, int], key: str) -> None:
        self.requests = requests
        self.fit: dict[str, set[str]] = {}
        self.domain_of: dict[str, str] = {}
        self.names: list[str] = []  # every fit node with the key, in name order
        for name in world.passing(pod, requests)[0]:
            value = world.topology_value(name, key)
            if value is None or world.fits(requests, world.nodes[name]) is not None:
                continue
            self.fit.setdefault(value, set()).add(name)
            self.domain_of[name] = value
            self.names.append(name)
        self.size = {v: len(world.domain(key, frozenset({v}))) for v in self.fit}
        self.by_rule = sorted(self._rule(v) for v in self.fit)
        self.by_room = sorted(self._room(v) for v in self.fit)

    def _rule(self, value: str) -> tuple[bool, int, str]:
        """(touched, feasible nodes, value): a gang's pick, smallest first."""
        count = len(self.fit[value])
        return (count < self.size[value], count, value)

    def _room(self, value: str) -> tuple[int, str, str]:
        """(-feasible nodes, first feasible node, value): a lone pod's pick, roomiest first."""
        return (-len(self.fit[value]), min(self.fit[value]), value)

    def drop(self, name: str) -> None:
        """The node no longer fits the requests (a pod was assumed there)."""
        value = self.domain_of.pop(name, None)
        if value is None:
            return
        _remove(self.by_rule, self._rule(value))
        _remove(self.by_room, self._room(value))
        _remove(self.names, name)
        self.fit[value].discard(name)
        if self.fit[value]:
            bisect.insort(self.by_rule, self._rule(value))
            bisect.insort(self.by_room, self._room(value))
        else:
            del self.fit[value]

    def choose(self, gang: int, excluded: set[str]) -> str | None:
        """`_prefer_whole_gang`'s node among the fit nodes of the domains not `excluded`;
        None when there is none."""
        if gang == 1:
            return next((first for _, first, v in self.by_room if v not in excluded), None)
        for touched in (False, True):
            i = bisect.bisect_left(self.by_rule, (touched, gang, ""))
            while i < len(self.by_rule) and self.by_rule[i][0] == touched:
                value = self.by_rule[i][2]
                if value not in excluded:
                    return min(self.fit[value])
                i += 1
        return next((n for n in self.names if self.domain_of[n] not in excluded), None)


def _remove(ordered: list[Any], item: Any) -> None:
    i = bisect.bisect_left(ordered, item)
    if i < len(ordered) and ordered[i] == item:
        del ordered[i]


class _World:
    """Nodes and the live pods bound to them, indexed for the checks below."""

    def __init__(
        self, nodes: Sequence[Obj], bound: Sequence[Obj], memo: Memo | None = None
    ) -> None:
        self.nodes = {str(_meta(n).get("name")): n for n in nodes}
        self.names = sorted(self.nodes)
        self.memo = memo or Memo()
        self.allocatable = {name: self.memo.allocatable(n) for name, n in self.nodes.items()}
        self.used: dict[str, dict[str, int]] = {name: {} for name in self.nodes}
        # resource -> nodes where none of it is left: a pod asking for some cannot go there.
        self.exhausted: dict[str, set[str]] = {}
        self.bound: list[_Bound] = []
        # Existing pods' anti-affinity terms, by a label a pod must carry to match one (the
        # terms without matchLabels apart): a newcomer looks only at those its labels name.
        self.anti_terms: dict[tuple[str, str], list[tuple[_Bound, Obj]]] = {}
        self.anti_terms_any: list[tuple[_Bound, Obj]] = []
        self.by_label: dict[tuple[str, str], list[_Bound]] = {}
        self._domains: dict[str, dict[str, list[str]]] = {}
        self._passing: dict[str, tuple[list[str], set[str]]] = {}
        self._gang_domains: dict[tuple[str, tuple[tuple[str, int], ...], str], _Domains] = {}
        # Why a pod found no node, by what decided it (shape, requests, affinity), until a pod
        # is placed: hundreds of pods that fit nowhere cost one look at every node, not one
        # each (issue #26: unreachable nodes under load made a pass pods x nodes).
        self.failures: dict[_FailureKey, Placement] = {}
        for pod in bound:
            self.add(pod, str((pod.get("spec") or {}).get("nodeName") or ""))

    def add(self, pod: Obj, node: str) -> None:
        if not node or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return
        entry = _Bound(pod, node)
        self.bound.append(entry)
        self.failures.clear()
        for label in _labels(pod).items():
            self.by_label.setdefault(label, []).append(entry)
        for term in _required_terms(pod, "podAntiAffinity"):
            key = _selector_key(term)
            (self.anti_terms_any if key is None else self.anti_terms.setdefault(key, [])).append(
                (entry, term)
            )
        if node in self.used:
            used = self.used[node]
            _add(used, self.memo.requests(pod))
            have = self.allocatable[node]
            for resource, amount in used.items():
                if amount >= have.get(resource, 0):
                    self.exhausted.setdefault(resource, set()).add(node)
            for domains in self._gang_domains.values():
                if node in domains.domain_of and self.fits(domains.requests, self.nodes[node]):
                    domains.drop(node)

    def gang_domains(self, pod: Obj, requests: Mapping[str, int], key: str) -> _Domains:
        """The `_Domains` of the pod's shape and requests by `key`, made once per pass."""
        index = (_shape(pod, requests), tuple(requests.items()), key)
        found = self._gang_domains.get(index)
        if found is None:
            found = self._gang_domains[index] = _Domains(self, pod, requests, key)
        return found

    def matching(self, term: Obj, owner: Obj) -> Iterable[_Bound]:
        """The bound pods the term (declared by `owner`) matches."""
        key = _selector_key(term)
        candidates = self.bound if key is None else self.by_label.get(key, ())
        return (b for b in candidates if _term_matches_pod(term, owner, b.pod))

    def topology_value(self, node: str, key: str) -> str | None:
        n = self.nodes.get(node)
        return None if n is None else _labels(n).get(key)

    def domain(self, key: str, values: frozenset[str]) -> list[str]:
        """The names of the nodes whose label `key` is one of `values`, sorted."""
        index = self._domains.get(key)
        if index is None:
            index = {}
            for name in self.names:
                value = _labels(self.nodes[name]).get(key)
                if value is not None:
                    index.setdefault(value, []).append(name)
            self._domains[key] = index
        if len(values) == 1:
            return index.get(next(iter(values)), [])
        return sorted(n for v in values for n in index.get(v, ()))

    def fits(self, requests: Mapping[str, int], node: Obj) -> str | None:
        """None when the requests fit the node's allocatable, else the first short resource."""
        name = str(_meta(node).get("name"))
        have = self.allocatable[name]
        used = self.used[name]
        for resource, wanted in requests.items():  # pod_requests: sorted, no zeros
            if used.get(resource, 0) + wanted > have.get(resource, 0):
                return resource
        return None

    def affinity_rules(self, pod: Obj) -> _AffinityRules:
        """Digest the pod's (and existing pods') required (anti-)affinity once per pod, so each
        node is then checked against sets of topology values."""
        required: list[tuple[str, frozenset[str] | None]] = []
        for term in _required_terms(pod, "podAffinity"):
            key = str(term.get("topologyKey", ""))
            matching = list(self.matching(term, pod))
            if not matching and _term_matches_pod(term, pod, pod):
                # The first pod of a group that matches its own term may go anywhere.
                required.append((key, None))
                continue
            values = {self.topology_value(b.node, key) for b in matching}
            required.append((key, frozenset(v for v in values if v is not None)))
        forbidden: set[tuple[str, str]] = set()
        for term in _required_terms(pod, "podAntiAffinity"):
            key = str(term.get("topologyKey", ""))
            for b in self.matching(term, pod):
                value = self.topology_value(b.node, key)
                if value is not None:
                    forbidden.add((key, value))
        repelled: set[tuple[str, str]] = set()
        candidates = [*self.anti_terms_any]
        for label in _labels(pod).items():
            candidates.extend(self.anti_terms.get(label, ()))
        for b, term in candidates:
            key = str(term.get("topologyKey", ""))
            value = self.topology_value(b.node, key)
            if value is not None and _term_matches_pod(term, b.pod, pod):
                repelled.add((key, value))
        return _AffinityRules(tuple(required), frozenset(forbidden), frozenset(repelled))

    def why_not(
        self, pod: Obj, node: Obj, requests: Mapping[str, int], rules: _AffinityRules
    ) -> str | None:
        reason = _node_only(pod, node, requests)
        if reason is not None:
            return reason
        return self.why_not_here(node, requests, rules)

    def why_not_here(
        self, node: Obj, requests: Mapping[str, int], rules: _AffinityRules
    ) -> str | None:
        """The checks that depend on what is bound where: resources, then pod (anti-)affinity."""
        short = self.fits(requests, node)
        if short is not None:
            return "Too many pods" if short == "pods" else f"Insufficient {short}"
        return rules.why_not(_labels(node))

    def feasible(self, pod: Obj, requests: Mapping[str, int], rules: _AffinityRules) -> list[str]:
        """The nodes `why_not` accepts, sorted, found the short way (module docstring)."""
        passing, passing_set = self.passing(pod, requests)
        candidates: Sequence[str] = passing
        for key, allowed in rules.required:
            if allowed is not None:
                candidates = [n for n in self.domain(key, allowed) if n in passing_set]
                break
        skip: set[str] = set()
        for resource, wanted in requests.items():
            if wanted > 0:
                skip |= self.exhausted.get(resource, set())
        return [
            name
            for name in candidates
            if name not in skip and self.why_not_here(self.nodes[name], requests, rules) is None
        ]

    def passing(self, pod: Obj, requests: Mapping[str, int]) -> tuple[list[str], set[str]]:
        """The nodes whose node-only checks the pod's shape passes, in name order: asked of
        every node once per shape and pass (nodes do not change within a pass), so a pass of
        a thousand heads looks at the 8,000 TPU hosts they cannot use once, not per head."""
        shape = _shape(pod, requests)
        found = self._passing.get(shape)
        if found is None:
            names = [n for n in self.names if self.node_only(pod, n, requests, shape) is None]
            found = self._passing[shape] = (names, set(names))
        return found

    def node_only(self, pod: Obj, name: str, requests: Mapping[str, int], shape: str) -> str | None:
        """``_node_only``, remembered by pod shape and node version."""
        node = self.nodes[name]
        version = str(_meta(node).get("resourceVersion", ""))
        known, reason = self.memo.get(shape, name, version)
        if not known:
            reason = _node_only(pod, node, requests)
            self.memo.put(shape, name, version, reason)
        return reason


def _node_only(pod: Obj, node: Obj, requests: Mapping[str, int]) -> str | None:
    """The checks that depend on the node alone (and the pod's shape)."""
    # As kube-scheduler: no check of the Ready condition itself; the node lifecycle
    # controller's not-ready/unreachable taints keep pods off a node that is not Ready.
    if (node.get("spec") or {}).get("unschedulable"):
        return "node(s) were unschedulable"
    taint = untolerated_taint(pod, node, requests)
    if taint is not None:
        return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
    if not _node_affinity_ok(pod, node):
        return "node(s) didn't match Pod's node affinity/selector"
    return None


def _self_affinity_key(pod: Obj) -> tuple[Obj, str] | None:
    """The first required pod affinity term the pod itself matches, with its topology key."""
    for term in _required_terms(pod, "podAffinity"):
        if _term_matches_pod(term, pod, pod):
            return term, str(term.get("topologyKey", ""))
    return None


class Pending:
    """The pods a pass has yet to place, in order, with their positions by label, so a gang's
    first pod counts its siblings in its own label's bucket: slicing and filtering every
    pending pod for each pod placed cost O(pending^2) a pass (issue #26)."""

    def __init__(self, pods: Sequence[Obj]) -> None:
        self.pods = list(pods)
        self._by_label: dict[tuple[str, str], list[int]] = {}
        for i, pod in enumerate(self.pods):
            for label in _labels(pod).items():
                self._by_label.setdefault(label, []).append(i)

    def after(self, index: int) -> PendingAfter:
        """The pods after position `index` (those not tried yet in this pass)."""
        return PendingAfter(self, index)


@dataclass(frozen=True)
class PendingAfter:
    pending: Pending
    index: int

    def __iter__(self) -> Iterator[Obj]:
        return iter(self.pending.pods[self.index + 1 :])

    def labelled(self, label: tuple[str, str]) -> list[Obj]:
        """The pods after `index` that carry `label`."""
        positions = self.pending._by_label.get(label, [])
        start = bisect.bisect_right(positions, self.index)
        return [self.pending.pods[i] for i in positions[start:]]


def place(
    pod: Obj,
    nodes: Sequence[Obj],
    bound: Sequence[Obj],
    pending: Sequence[Obj] = (),
) -> Placement:
    """Pick a node for `pod` among `nodes`, given the pods already `bound` to nodes. `pending`
    are other pods waiting to be scheduled (used only to keep a gang in one domain).

    Ties are broken by node name, so the same world always gives the same answer.
    """
    return Snapshot(nodes, bound).place(pod, pending)


class Snapshot:
    """One scheduling pass: place pods one after another, each seeing the ones placed before."""

    def __init__(
        self, nodes: Sequence[Obj], bound: Sequence[Obj], memo: Memo | None = None
    ) -> None:
        self._world = _World(nodes, bound, memo)

    def place(
        self,
        pod: Obj,
        pending: Sequence[Obj] | PendingAfter = (),
        claims_fit: Callable[[str], str | None] | None = None,
    ) -> Placement:
        """`claims_fit(node)`: None when the pod's resource claims can be allocated there,
        else the reason (DRA's Filter, `scheduler/dra.py`), asked of otherwise feasible nodes."""
        return _place(self._world, pod, pending, claims_fit)

    def assume(self, pod: Obj, node: str) -> None:
        """Count `pod` as bound to `node` for the rest of the pass."""
        bound = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node}}
        self._world.add(bound, node)


def _place(
    world: _World,
    pod: Obj,
    pending: Sequence[Obj] | PendingAfter,
    claims_fit: Callable[[str], str | None] | None = None,
) -> Placement:
    requests = pod_requests(pod)
    rules = world.affinity_rules(pod)
    failure: _FailureKey | None = None
    if claims_fit is None:
        chosen = _first_of_gang(world, pod, requests, rules, pending)
        if chosen is not None:
            return Placement(chosen)
        failure = (_shape(pod, requests), tuple(requests.items()), rules)
        known = world.failures.get(failure)
        if known is not None:
            return known
    feasible = world.feasible(pod, requests, rules)
    claims_reasons: dict[str, str] = {}
    if claims_fit is not None:
        for name in feasible:
            reason = claims_fit(name)
            if reason is not None:
                claims_reasons[name] = reason
        feasible = [name for name in feasible if name not in claims_reasons]
    if not feasible:
        reasons: Counter[str] = Counter()
        shape = _shape(pod, requests)
        for name in world.names:
            reason = world.node_only(pod, name, requests, shape)
            if reason is None:
                reason = world.why_not_here(world.nodes[name], requests, rules)
            if reason is None:
                reason = claims_reasons.get(name)
            if reason is not None:
                reasons[reason] += 1
        detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
        placement = Placement(None, f"0/{len(world.nodes)} nodes are available: {detail}.")
        if failure is not None:
            world.failures[failure] = placement
        return placement
    return Placement(_prefer_whole_gang(pod, feasible, world, pending))


def _prefer_whole_gang(
    pod: Obj, feasible: list[str], world: _World, pending: Sequence[Obj] | PendingAfter
) -> str:
    found = _self_affinity_key(pod)
    if found is None:
        return feasible[0]
    term, key = found
    if any(True for _ in world.matching(term, pod)):
        return feasible[0]  # the gang has started; affinity already pins the domain
    gang = _gang_size(pod, term, pending)
    per_domain: Counter[str] = Counter()
    for name in feasible:
        value = world.topology_value(name, key)
        if value is not None:
            per_domain[value] += 1
    # Counting feasible nodes is exact for one pod per host (TPU/GPU hosts) and a fair
    # approximation otherwise. A known gang takes the smallest untouched domain that holds
    # it; a lone first pod (its siblings not created yet) takes the roomiest, so they can
    # follow it.
    if gang == 1:
        # per_domain keeps first-seen (name) order, and max() keeps the first of equals.
        roomiest = max(per_domain, key=per_domain.__getitem__, default=None)
        return next((n for n in feasible if world.topology_value(n, key) == roomiest), feasible[0])
    # The pods of a gang reach the scheduler in any order and pass, so `gang` may count only
    # some of them: a domain another gang has started in would then look big enough and two
    # half gangs could each hold half of it for ever. An untouched domain (every node still
    # feasible) is taken first; among equals the smallest that holds the gang.
    roomy = [
        (count < len(world.domain(key, frozenset({value}))), count, value)
        for value, count in per_domain.items()
        if count >= gang
    ]
    if not roomy:
        return feasible[0]
    _, _, chosen = min(roomy)
    return next(n for n in feasible if world.topology_value(n, key) == chosen)


def _gang_size(pod: Obj, term: Obj, pending: Sequence[Obj] | PendingAfter) -> int:
    """The pod and the pending pods its self-affinity term matches."""
    me = (_meta(pod).get("namespace"), _meta(pod).get("name"))
    label = _selector_key(term)
    siblings: Iterable[Obj] = pending
    if label is not None and isinstance(pending, PendingAfter):
        siblings = pending.labelled(label)  # thousands may be pending: only its label's
    elif label is not None:
        siblings = [o for o in pending if _labels(o).get(label[0]) == label[1]]
    return 1 + sum(
        1
        for other in siblings
        if (_meta(other).get("namespace"), _meta(other).get("name")) != me
        and _term_matches_pod(term, pod, other)
    )


def _first_of_gang(
    world: _World,
    pod: Obj,
    requests: Mapping[str, int],
    rules: _AffinityRules,
    pending: Sequence[Obj] | PendingAfter,
) -> str | None:
    """`_prefer_whole_gang`'s answer for the first pod of a gang, from the pass's per-domain
    index instead of every feasible node; None when the pod is not such a pod (then the
    plain search decides). Exact when its only required affinity is its own gang's (any
    domain with the key) and every (anti-)affinity exclusion is by that same key: then the
    feasible nodes are the fit nodes with the key outside the excluded domains."""
    found = _self_affinity_key(pod)
    if found is None:
        return None
    term, key = found
    if rules.required != ((key, None),):
        return None  # not the first of its gang, or other affinity terms
    excluded = rules.forbidden | rules.repelled
    if any(k != key for k, _ in excluded):
        return None
    domains = world.gang_domains(pod, requests, key)
    return domains.choose(_gang_size(pod, term, pending), {v for _, v in excluded})
