"""RBAC escalation prevention's arithmetic, as kube's rbac validation does it.

Requested rules are broken into one verb/group/resource/name (or url/verb) each; every piece
must be covered by one rule the requester holds (`*` verbs, groups and resources cover all;
`*/sub` covers a subresource of any resource; an owner rule with resourceNames covers only
those names); what is missing is reported compacted (pieces on one group/resource/name merge
their verbs), one rule a line, sorted, in kube's `{APIGroups:[...], Resources:[...],
Verbs:[...]}` notation.
"""

from __future__ import annotations

from collections.abc import Iterable

from devkube.server.auth.identity import UserInfo
from devkube.server.auth.rbac import Rule, go_quote, go_quote_list, url_matches


def breakdown(rule: Rule) -> list[Rule]:
    """One rule per (group, resource, verb[, name]) and per (url, verb), in kube's order."""
    out: list[Rule] = []
    for group in rule.api_groups:
        for resource in rule.resources:
            for verb in rule.verbs:
                if rule.resource_names:
                    out.extend(
                        Rule((verb,), (group,), (resource,), (name,))
                        for name in rule.resource_names
                    )
                else:
                    out.append(Rule((verb,), (group,), (resource,)))
    for url in rule.non_resource_urls:
        out.extend(Rule((verb,), non_resource_urls=(url,)) for verb in rule.verbs)
    return out


def _has_all(held: tuple[str, ...], wanted: tuple[str, ...]) -> bool:
    return "*" in held or all(w in held for w in wanted)


def _resources_cover(held: tuple[str, ...], wanted: tuple[str, ...]) -> bool:
    if "*" in held or all(w in held for w in wanted):
        return True
    for path in wanted:
        if path in held:
            continue
        if "/" not in path:
            return False
        if "*/" + path.split("/", 1)[1] not in held:
            return False
    return True


def _urls_cover(held: tuple[str, ...], wanted: tuple[str, ...]) -> bool:
    return all(any(url_matches(h, w) for h in held) for w in wanted)


def rule_covers(owner: Rule, sub: Rule) -> bool:
    if not _has_all(owner.verbs, sub.verbs):
        return False
    if sub.non_resource_urls:
        return _urls_cover(owner.non_resource_urls, sub.non_resource_urls)
    if not owner.api_groups or not _has_all(owner.api_groups, sub.api_groups):
        return False
    if not _resources_cover(owner.resources, sub.resources):
        return False
    if not owner.resource_names:
        return True
    return bool(sub.resource_names) and all(n in owner.resource_names for n in sub.resource_names)


def missing(owner: Iterable[Rule], requested: Iterable[Rule]) -> list[Rule]:
    """The atomic pieces of `requested` that no rule of `owner` covers."""
    held = list(owner)
    return [
        piece
        for rule in requested
        for piece in breakdown(rule)
        if not any(rule_covers(o, piece) for o in held)
    ]


def compact(rules: list[Rule]) -> list[Rule]:
    """kube's CompactRules: atomic rules on one group/resource/name merge their verbs."""
    merged: dict[tuple[str, str, str], list[str]] = {}
    others: list[Rule] = []
    for rule in rules:
        simple = (
            len(rule.api_groups) == 1
            and len(rule.resources) == 1
            and len(rule.resource_names) <= 1
            and not rule.non_resource_urls
        )
        if not simple:
            others.append(rule)
            continue
        key = (
            rule.api_groups[0],
            rule.resources[0],
            rule.resource_names[0] if rule.resource_names else "\0",
        )
        verbs = merged.setdefault(key, [])
        verbs.extend(v for v in rule.verbs if v not in verbs)
    out = [
        Rule(tuple(verbs), (group,), (resource,), () if name == "\0" else (name,))
        for (group, resource, name), verbs in merged.items()
    ]
    return out + others


def escalation_message(user: UserInfo, missing_rules: list[Rule], errors: tuple[str, ...]) -> str:
    lines = sorted({r.compact_string() for r in compact(missing_rules)})
    text = (
        f"user {go_quote(user.name)} (groups={go_quote_list(user.groups)}) is attempting to "
        "grant RBAC permissions not currently held:\n" + "\n".join(lines)
    )
    if errors:
        text += "; resolution errors: [" + " ".join(errors) + "]"
    return text
