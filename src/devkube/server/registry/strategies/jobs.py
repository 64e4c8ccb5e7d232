"""batch/v1 Job: what kube-apiserver fills in on create and refuses, as `kubectl get job -o
yaml` shows it (docs/design.md §8, "Jobs").

The selector is generated from the Job's uid unless `manualSelector` is true, and the same
labels go into the pod template, so the Job's pods can be found from the Job (`kubectl logs
job/NAME` lists them by `spec.selector`).
"""

from __future__ import annotations

import json
from typing import Any

from kubefacts.objects import Obj

Cause = tuple[str, str]

UID_LABEL = "batch.kubernetes.io/controller-uid"
NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_UID_LABEL = "controller-uid"
LEGACY_NAME_LABEL = "job-name"
RESTART_POLICIES = ("OnFailure", "Never")


def default_job(obj: Obj) -> None:
    """Defaults of a new Job (its uid is set already)."""
    meta = obj["metadata"]
    spec = obj.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    replacement = "Failed" if spec.get("podFailurePolicy") is not None else "TerminatingOrFailed"
    spec.setdefault("podReplacementPolicy", replacement)
    template = spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    if not spec.get("manualSelector"):
        spec["manualSelector"] = False
        labels = tmeta.setdefault("labels", {})
        labels.update(
            {
                UID_LABEL: meta["uid"],
                NAME_LABEL: meta["name"],
                LEGACY_UID_LABEL: meta["uid"],
                LEGACY_NAME_LABEL: meta["name"],
            }
        )
        spec["selector"] = {"matchLabels": {UID_LABEL: meta["uid"]}}
    pod_spec = template.setdefault("spec", {})
    pod_spec.setdefault("restartPolicy", "Always")
    pod_spec.setdefault("dnsPolicy", "ClusterFirst")
    pod_spec.setdefault("schedulerName", "default-scheduler")
    pod_spec.setdefault("terminationGracePeriodSeconds", 30)
    pod_spec.setdefault("securityContext", {})


#: Fields the dev cluster's Job controller does not run: refused, not run as something else.
NOT_RUN = ("backoffLimitPerIndex", "maxFailedIndexes", "successPolicy")
MAX_INDEXED = 100000


def job_causes(obj: Obj) -> list[Cause]:
    """The template's restart policy rule, the manual selector's, Indexed mode's and the pod
    failure policy's (kube's ``pkg/apis/batch/validation`` words)."""
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    policy = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") or "Always"
    if policy not in RESTART_POLICIES:
        causes.append(
            (
                "spec.template.spec.restartPolicy",
                f'Unsupported value: "{policy}": supported values: "OnFailure", "Never"',
            )
        )
    elif spec.get("podFailurePolicy") is not None and policy != "Never":
        causes.append(
            (
                "spec.template.spec.restartPolicy",
                f'Invalid value: "{policy}": only "Never" is supported when podFailurePolicy '
                "is specified",
            )
        )
    for name in NOT_RUN:
        if spec.get(name) is not None:
            causes.append(
                (f"spec.{name}", "Forbidden: not run by the dev cluster's Job controller (devkube)")
            )
    if spec.get("completionMode") not in (None, "NonIndexed", "Indexed"):
        causes.append(
            (
                "spec.completionMode",
                f'Unsupported value: "{spec["completionMode"]}": supported values: '
                '"Indexed", "NonIndexed"',
            )
        )
    if spec.get("completionMode") == "Indexed":
        if spec.get("completions") is None:
            causes.append(("spec.completions", "Required value: when completion mode is Indexed"))
        for name in ("completions", "parallelism"):
            value = spec.get(name)
            if isinstance(value, int) and value > MAX_INDEXED:
                causes.append(
                    (
                        f"spec.{name}",
                        f"Invalid value: {value}: must be less than or equal to {MAX_INDEXED} "
                        "when completion mode is Indexed",
                    )
                )
    if spec.get("podFailurePolicy") is not None:
        causes += failure_policy_causes(spec)
    if spec.get("manualSelector") and not spec.get("selector"):
        causes.append(("spec.selector", "Required value"))
    for field in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"):
        value = spec.get(field)
        if isinstance(value, int) and value < (1 if field == "activeDeadlineSeconds" else 0):
            bound = (
                "greater than 0"
                if field == "activeDeadlineSeconds"
                else "greater than or equal to 0"
            )
            causes.append((f"spec.{field}", f"Invalid value: {value}: must be {bound}"))
    return causes


def failure_policy_causes(spec: Obj) -> list[Cause]:
    """kube's ``validatePodFailurePolicyRule`` checks, in its words."""
    causes: list[Cause] = []
    template = (spec.get("template") or {}).get("spec") or {}
    names = {c.get("name") for c in (template.get("containers") or [])}
    names |= {c.get("name") for c in (template.get("initContainers") or [])}
    actions = '"Count", "FailIndex", "FailJob", "Ignore"'
    for i, rule in enumerate((spec.get("podFailurePolicy") or {}).get("rules") or []):
        where = f"spec.podFailurePolicy.rules[{i}]"
        action = rule.get("action")
        if not action:
            causes.append((f"{where}.action", f"Required value: valid values: [{actions}]"))
        elif action == "FailIndex":
            causes.append(
                (
                    f"{where}.action",
                    'Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set',
                )
            )
        elif action not in ("Count", "FailJob", "Ignore"):
            causes.append(
                (
                    f"{where}.action",
                    f'Unsupported value: "{action}": supported values: {actions}',
                )
            )
        codes = rule.get("onExitCodes")
        conditions = rule.get("onPodConditions") or []
        if codes is not None:
            causes += _exit_code_causes(codes, f"{where}.onExitCodes", names)
        if codes is not None and conditions:
            causes.append(
                (
                    where,
                    "Invalid value: specifying both OnExitCodes and OnPodConditions is not "
                    "supported",
                )
            )
        if codes is None and not conditions:
            causes.append(
                (
                    where,
                    "Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
                )
            )
    return causes


def _exit_code_causes(codes: Obj, where: str, names: set[object]) -> list[Cause]:
    causes: list[Cause] = []
    operator = codes.get("operator")
    if operator not in ("In", "NotIn"):
        text = f'Unsupported value: "{operator}": supported values: "In", "NotIn"'
        if not operator:
            text = 'Required value: valid values: ["In" "NotIn"]'
        causes.append((f"{where}.operator", text))
    name = codes.get("containerName")
    if name is not None and name not in names:
        causes.append(
            (
                f"{where}.containerName",
                f'Invalid value: "{name}": must be one of the container or initContainer names '
                "in the pod template",
            )
        )
    values = list(codes.get("values") or [])
    if not values:
        causes.append((f"{where}.values", "Invalid value: []: at least one value is required"))
    for j, value in enumerate(values):
        if operator == "In" and value == 0:
            causes.append(
                (f"{where}.values[{j}]", "Invalid value: 0: must not be 0 for the In operator")
            )
        if value in values[:j]:
            causes.append((f"{where}.values[{j}]", f"Duplicate value: {value}"))
    if values != sorted(values):
        shown = "[]int32{" + ", ".join(str(v) for v in values) + "}"
        causes.append((f"{where}.values", f"Invalid value: {shown}: must be ordered"))
    return causes


_FIXED = (
    "completionMode",
    "podFailurePolicy",
    "backoffLimitPerIndex",
    "managedBy",
    "successPolicy",
)
#: What a suspended Job without pods may change in its pod template (with the containers'
#: resources and the template's labels, annotations and node affinity).
_SCHEDULING = ("nodeSelector", "tolerations", "schedulingGates")


def _shown(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _template_for_compare(template: Obj, scheduling_mutable: bool) -> Obj:
    frozen: Obj = json.loads(json.dumps(template or {}))
    if scheduling_mutable:
        meta = frozen.setdefault("metadata", {})
        meta.pop("labels", None)
        meta.pop("annotations", None)
        spec = frozen.setdefault("spec", {})
        for key in _SCHEDULING:
            spec.pop(key, None)
        affinity = spec.get("affinity")
        if isinstance(affinity, dict):
            affinity.pop("nodeAffinity", None)
            if not affinity:
                spec.pop("affinity")
        for group in ("initContainers", "containers"):
            for container in spec.get(group) or []:
                if isinstance(container, dict):
                    container.pop("resources", None)
    return frozen


def _template_mutable(old: Obj) -> bool:
    """Suspended, and never started or suspended since, with no pod running (kube's
    mutable scheduling directives and pod resources for suspended Jobs, on in v1.37)."""
    status = old.get("status") or {}
    conditions = status.get("conditions") or []
    suspended_now = any(
        c.get("type") == "Suspended" and c.get("status") == "True" for c in conditions
    )
    return (
        (old.get("spec") or {}).get("suspend") is True
        and (not status.get("startTime") or suspended_now)
        and not status.get("active")
    )


def job_update_causes(old: Obj, new: Obj) -> list[Cause]:
    """ValidateJobSpecUpdate: fields fixed once a Job exists. A template change shows the v1
    template (kube prints its internal Go struct there)."""
    spec, before = new.get("spec") or {}, old.get("spec") or {}
    causes: list[Cause] = []
    if spec.get("completions") != before.get("completions"):
        if spec.get("completionMode") != "Indexed":
            causes.append(
                (
                    "spec.completions",
                    f"Invalid value: {_shown(spec.get('completions'))}: field is immutable",
                )
            )
        elif spec.get("completions") is not None and spec.get("completions") != spec.get(
            "parallelism"
        ):
            why = "can only be modified in tandem with spec.parallelism"
            causes.append(("spec.completions", f"Invalid value: {spec['completions']}: {why}"))
    if spec.get("selector") != before.get("selector"):
        causes.append(
            ("spec.selector", f"Invalid value: {_shown(spec.get('selector'))}: field is immutable")
        )
    mutable = _template_mutable(old)
    after_t = _template_for_compare(spec.get("template") or {}, mutable)
    before_t = _template_for_compare(before.get("template") or {}, mutable)
    if after_t != before_t:
        # Suspended without pods, only the template's spec is compared (the rest may change).
        path, value = "spec.template", spec.get("template")
        if mutable:
            path, value = "spec.template.spec", (value or {}).get("spec")
        causes.append((path, f"Invalid value: {_shown(value)}: field is immutable"))
    for key in _FIXED:
        if spec.get(key) != before.get(key):
            causes.append(
                (f"spec.{key}", f"Invalid value: {_shown(spec.get(key))}: field is immutable")
            )
    return causes
