"""batch/v1 Job: what kube-apiserver fills in on create and refuses, as `kubectl get job -o
yaml` shows it (docs/design.md §8, "Jobs").

The selector is generated from the Job's uid unless `manualSelector` is true, and the same
labels go into the pod template, so the Job's pods can be found from the Job (`kubectl logs
job/NAME` lists them by `spec.selector`).
"""

from __future__ import annotations

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
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
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


def job_causes(obj: Obj) -> list[Cause]:
    """The template's restart policy rule, and the manual selector's."""
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
