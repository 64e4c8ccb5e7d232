"""Pod Security Admission, as kube-apiserver's built-in PodSecurity plugin applies the Pod
Security Standards from a namespace's labels:

- `pod-security.kubernetes.io/enforce: privileged|baseline|restricted` refuses a pod that
  violates the level (403 `violates PodSecurity "baseline:latest": <check> (<detail>), ...`),
  on create and on an update that changes what the policy reads (an image, a container
  added, a seccomp annotation; a label or status change is not checked), as kube's
  isSignificantPodUpdate decides;
- `.../warn` answers a `299` Warning (`would violate PodSecurity "restricted:latest": ...`)
  for a pod the enforce level admitted, and for the pod templates of workloads (Deployments,
  ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs, ...), which are checked against the
  warn and audit levels only, never enforce (kube's ValidatePodController): `warn:
  privileged` silences them whatever `enforce` says;
- `.../audit` is accepted and has no effect (the dev cluster keeps no audit log);
- `.../<mode>-version` is printed as given (`baseline:v1.30`); every version is evaluated
  with the latest checks;
- the labels are validated on the namespace (kube's ValidateNamespace): a level outside the
  three or a version other than `latest`/`v1.x` is refused with NewInvalid's 422 (`Namespace
  "n" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value:
  "strict": must be one of privileged, baseline, restricted`, a cause per label) on create,
  and on update when the errors change. A namespace that
  carries an invalid level anyway enforces `restricted` and warns at `privileged`, as kube
  fails closed for enforce and open for warn.

The checks, their order (baseline's, then baseline's overlapping ones or restricted's) and
their wording follow the pod-security-admission policy package; an unlabelled namespace is
privileged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from devkube.server.admission.access import Admission
from devkube.server.auth.rbac import forbidden_error
from devkube.server.errors import invalid
from devkube.server.registry import admitting
from devkube.server.registry.resources import ResourceType
from devkube.server.registry.store import Store
from kubefacts.objects import Obj

PREFIX = "pod-security.kubernetes.io/"
LEVELS = ("privileged", "baseline", "restricted")
Check = Callable[[Mapping[str, Any], Mapping[str, Any]], "tuple[str, str] | None"]
_DEFAULT_CAPS = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
_SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
}
_OK_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
_WORKLOADS = {
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("batch", "jobs"),
    ("", "replicationcontrollers"),
    ("", "podtemplates"),
}


def _plural(one: str, many: str, n: int) -> str:
    return one if n == 1 else many


def _quote(names: list[str]) -> str:
    return ", ".join(f'"{n}"' for n in names)


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def _sc(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    sc: Mapping[str, Any] = obj.get("securityContext") or {}
    return sc


def _containers_detail(bad: list[str], rest: str) -> tuple[str, str] | None:
    return (
        None
        if not bad
        else ("", f"{_plural('container', 'containers', len(bad))} {_quote(bad)} {rest}")
    )


def app_armor(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, str] | None:
    bad: list[str] = []
    if (_sc(spec).get("appArmorProfile") or {}).get("type") == "Unconfined":
        bad.append('pod must not set securityContext.appArmorProfile.type to "Unconfined"')
    names = [
        str(c.get("name"))
        for c in _containers(spec)
        if (_sc(c).get("appArmorProfile") or {}).get("type") == "Unconfined"
    ]
    if names:
        bad.append(
            f"{_plural('container', 'containers', len(names))} {_quote(names)} must not set "
            'securityContext.appArmorProfile.type to "Unconfined"'
        )
    prefix = "container.apparmor.security.beta.kubernetes.io/"
    for key, value in sorted((meta.get("annotations") or {}).items()):
        if key.startswith(prefix) and not (
            value == "runtime/default" or str(value).startswith("localhost/")
        ):
            bad.append(f'{key}="{value}"')
    if not bad:
        return None
    return ("forbidden AppArmor profile" if len(bad) == 1 else "forbidden AppArmor profiles"), (
        ", ".join(bad)
    )


def host_namespaces(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, str] | None:
    found = sorted(k for k in ("hostIPC", "hostNetwork", "hostPID") if spec.get(k))
    return ("host namespaces", ", ".join(f"{k}=true" for k in found)) if found else None


def host_path(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, str] | None:
    names = [str(v.get("name")) for v in spec.get("volumes") or [] if v.get("hostPath")]
    if not names:
        return None
    return "hostPath volumes", f"{_plural('volume', 'volumes', len(names))} {_quote(names)}"


def host_ports(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, str] | None:
    bad: list[str] = []
    ports: set[str] = set()
    for c in _containers(spec):
        mine = [int(p.get("hostPort")) for p in c.get("ports") or [] if p.get("hostPort")]
        if mine:
            bad.append(str(c.get("name")))
            ports.update(str(p) for p in mine)
    if not bad:
        return None
    listed = ", ".join(sorted(ports))
    return "hostPort", (
        f"{_plural('container', 'containers', len(bad))} {_quote(bad)} "
        f"{_plural('uses', 'use', len(bad))} {_plural('hostPort', 'hostPorts', len(ports))} "
        f"{listed}"
    )


def _each(spec: Mapping[str, Any], test: Callable[[Mapping[str, Any]], bool]) -> list[str]:
    return [str(c.get("name")) for c in _containers(spec) if test(c)]


def privileged(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, str] | None:
    bad = _each(spec, lambda c: _sc(c).get("privileged") is True)
    found = _containers_detail(bad, "must not set securityContext.privileged=true")
    return ("privileged", found[1]) if found else None


def proc_mount(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, str] | None:
    bad = _each(spec, lambda c: _sc(c).get("procMount") not in (None, "Default"))
    found = _containers_detail(bad, 'must not set securityContext.procMount to "Unmasked"')
    return ("procMount", found[1]) if found else None


def se_linux(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, str] | None:
    allowed_types = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")

    def bad_of(sc: Mapping[str, Any]) -> list[str]:
        opts = sc.get("seLinuxOptions") or {}
        out = []
        if str(opts.get("type") or "") not in allowed_types:
            out.append(f'type "{opts.get("type")}"')
        for key in ("user", "role"):
            if opts.get(key):
                out.append(f'{key} "{opts.get(key)}"')
        return out

    setters, values = [], []
    if bad_of(_sc(spec)):
        setters.append("pod")
        values += bad_of(_sc(spec))
    names = [str(c.get("name")) for c in _containers(spec) if bad_of(_sc(c))]
    for c in _containers(spec):
        values += bad_of(_sc(c))
    if names:
        setters.append(f"{_plural('container', 'containers', len(names))} {_quote(names)}")
    if not setters:
        return None
    detail = f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: "
    return "seLinuxOptions", detail + "; ".join(sorted(set(values)))


def sysctls(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, str] | None:
    bad = [
        str(s.get("name"))
        for s in _sc(spec).get("sysctls") or []
        if str(s.get("name")) not in _SAFE_SYSCTLS
    ]
    return ("forbidden sysctls", ", ".join(bad)) if bad else None


def capabilities_baseline(
    meta: Mapping[str, Any], spec: Mapping[str, Any]
) -> tuple[str, str] | None:
    bad, caps = [], set()
    for c in _containers(spec):
        extra = [str(x) for x in (_sc(c).get("capabilities") or {}).get("add") or []]
        extra = [x for x in extra if x not in _DEFAULT_CAPS]
        if extra:
            bad.append(str(c.get("name")))
            caps.update(extra)
    if not bad:
        return None
    return "non-default capabilities", (
        f"{_plural('container', 'containers', len(bad))} {_quote(bad)} must not include "
        f"{_quote(sorted(caps))} in securityContext.capabilities.add"
    )


def _seccomp_bad(profile: Mapping[str, Any] | None, restricted: bool) -> str | None:
    if profile is None:
        return None
    kind = str(profile.get("type") or "")
    if restricted:
        return None if kind in ("RuntimeDefault", "Localhost") else kind
    return kind if kind == "Unconfined" else None


def seccomp(restricted: bool) -> Check:
    def check(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, str] | None:
        setters, values, implicit = [], set(), []
        pod_profile = _sc(spec).get("seccompProfile")
        pod_bad = _seccomp_bad(pod_profile, restricted)
        if pod_bad is not None:
            setters.append("pod")
            values.add(pod_bad)
        explicit = []
        for c in _containers(spec):
            profile = _sc(c).get("seccompProfile")
            bad = _seccomp_bad(profile, restricted)
            if bad is not None:
                explicit.append(str(c.get("name")))
                values.add(bad)
            elif profile is None and restricted and (pod_profile is None or pod_bad is not None):
                implicit.append(str(c.get("name")))
        if explicit:
            setters.append(
                f"{_plural('container', 'containers', len(explicit))} {_quote(explicit)}"
            )
        if setters:
            return "seccompProfile", (
                f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
                f"{_quote(sorted(values))}"
            )
        if implicit:
            return "seccompProfile", (
                f"pod or {_plural('container', 'containers', len(implicit))} {_quote(implicit)} "
                'must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"'
            )
        return None

    return check


def privilege_escalation(
    meta: Mapping[str, Any], spec: Mapping[str, Any]
) -> tuple[str, str] | None:
    bad = _each(spec, lambda c: _sc(c).get("allowPrivilegeEscalation") is not False)
    found = _containers_detail(bad, "must set securityContext.allowPrivilegeEscalation=false")
    return ("allowPrivilegeEscalation != false", found[1]) if found else None


def capabilities_restricted(
    meta: Mapping[str, Any], spec: Mapping[str, Any]
) -> tuple[str, str] | None:
    no_drop, adding, caps = [], [], set()
    for c in _containers(spec):
        capabilities = _sc(c).get("capabilities")
        if capabilities is None:
            no_drop.append(str(c.get("name")))
            continue
        if "ALL" not in (capabilities.get("drop") or []):
            no_drop.append(str(c.get("name")))
        extra = [str(x) for x in capabilities.get("add") or [] if x != "NET_BIND_SERVICE"]
        if extra:
            adding.append(str(c.get("name")))
            caps.update(extra)
    details = []
    if no_drop:
        details.append(
            f"{_plural('container', 'containers', len(no_drop))} {_quote(no_drop)} must set "
            'securityContext.capabilities.drop=["ALL"]'
        )
    if adding:
        details.append(
            f"{_plural('container', 'containers', len(adding))} {_quote(adding)} must not "
            f"include {_quote(sorted(caps))} in securityContext.capabilities.add"
        )
    return ("unrestricted capabilities", "; ".join(details)) if details else None


def volume_types(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, str] | None:
    """Volumes in pod order, their types (the source's field name) sorted and distinct."""
    bad: list[str] = []
    kinds: set[str] = set()
    for v in spec.get("volumes") or []:
        if any(v.get(k) is not None for k in _OK_VOLUMES):
            continue
        bad.append(str(v.get("name")))
        sources = [k for k, value in v.items() if k != "name" and value is not None]
        kinds.add(sources[0] if sources else "unknown")
    if not bad:
        return None
    return "restricted volume types", (
        f"{_plural('volume', 'volumes', len(bad))} {_quote(bad)} "
        f"{_plural('uses', 'use', len(bad))} "
        f"{_plural('restricted volume type', 'restricted volume types', len(kinds))} "
        f"{_quote(sorted(kinds))}"
    )


def run_as_non_root(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, str] | None:
    setters: list[str] = []
    pod_value = _sc(spec).get("runAsNonRoot")
    if pod_value is False:
        setters.append("pod")
    explicit = _each(spec, lambda c: _sc(c).get("runAsNonRoot") is False)
    implicit = _each(spec, lambda c: _sc(c).get("runAsNonRoot") is None and pod_value is not True)
    if explicit:
        setters.append(f"{_plural('container', 'containers', len(explicit))} {_quote(explicit)}")
    if setters:
        return "runAsNonRoot != true", (
            f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false"
        )
    if implicit:
        return "runAsNonRoot != true", (
            f"pod or {_plural('container', 'containers', len(implicit))} {_quote(implicit)} "
            "must set securityContext.runAsNonRoot=true"
        )
    return None


def run_as_user(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[str, str] | None:
    setters = ["pod"] if _sc(spec).get("runAsUser") == 0 else []
    bad = _each(spec, lambda c: _sc(c).get("runAsUser") == 0)
    if bad:
        setters.append(f"{_plural('container', 'containers', len(bad))} {_quote(bad)}")
    return ("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0") if setters else None


#: (check, baseline-only overlap) in the policy package's order.
BASELINE: list[Check] = [
    app_armor,
    host_namespaces,
    host_ports,
    privileged,
    proc_mount,
    se_linux,
    sysctls,
]
BASELINE_OVERLAP: list[Check] = [capabilities_baseline, host_path, seccomp(False)]
RESTRICTED: list[Check] = [
    privilege_escalation,
    capabilities_restricted,
    volume_types,
    run_as_non_root,
    run_as_user,
    seccomp(True),
]


def violations(level: str, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> list[str]:
    """`reason (detail)` for every check of `level` the pod fails, in kube's order."""
    if level not in ("baseline", "restricted"):
        return []
    checks = BASELINE + (BASELINE_OVERLAP if level == "baseline" else RESTRICTED)
    out = []
    for check in checks:
        found = check(meta, spec)
        if found:
            reason, detail = found
            out.append(f"{reason} ({detail})" if detail else reason)
    return out


_VERSION = re.compile(r"^v1\.(0|[1-9][0-9]*)$")
_LEVELS_TEXT = ", ".join(LEVELS)


def namespace_policy(
    labels: Mapping[str, Any],
) -> tuple[dict[str, tuple[str, str]], list[tuple[str, str]]]:
    """(level, version) per mode, and the label errors, as kube's PolicyToEvaluate reads
    them: an invalid enforce level counts as restricted, an invalid warn or audit level as
    privileged, an invalid version as latest. An error is (field, message)."""
    policy: dict[str, tuple[str, str]] = {}
    errors: list[tuple[str, str]] = []
    for mode in ("enforce", "audit", "warn"):
        level, version = "privileged", "latest"
        key = PREFIX + mode
        if key in labels:
            value = str(labels[key])
            if value in LEVELS:
                level = value
            else:
                level = "restricted" if mode == "enforce" else "privileged"
                errors.append(
                    (
                        f"metadata.labels[{key}]",
                        f'Invalid value: "{value}": must be one of {_LEVELS_TEXT}',
                    )
                )
        if f"{key}-version" in labels:
            value = str(labels[f"{key}-version"])
            if value == "latest" or _VERSION.match(value):
                version = value
            else:
                errors.append(
                    (
                        f"metadata.labels[{key}-version]",
                        f'Invalid value: "{value}": must be "latest" or "v1.x"',
                    )
                )
        policy[mode] = (level, version)
    return policy, errors


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    labels: Mapping[str, Any] = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return labels


def _check_namespace(old: Obj | None, new: Obj) -> None:
    """Kube's ValidateNamespace: valid labels on create, and on an update that changes the
    errors (a namespace already carrying a bad label may still be written otherwise). The
    422 is NewInvalid's, as kube's plugin answers it: kind Namespace, a cause per label
    (kubectl prints them)."""
    errors = namespace_policy(_labels(new))[1]
    if not errors:
        return
    if old is not None and namespace_policy(_labels(old))[1] == errors:
        return
    name = str((new.get("metadata") or {}).get("name") or "")
    raise invalid("Namespace", "", name, errors)


_SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER = "container.seccomp.security.alpha.kubernetes.io/"


def significant_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Kube's isSignificantPodUpdate: only a change the policy could judge differently."""
    notes = ((new.get("metadata") or {}).get("annotations")) or {}
    old_notes = ((old.get("metadata") or {}).get("annotations")) or {}
    if notes.get(_SECCOMP_POD) != old_notes.get(_SECCOMP_POD):
        return True
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    for key in ("containers", "initContainers"):
        mine, theirs = spec.get(key) or [], old_spec.get(key) or []
        if len(mine) != len(theirs):
            return True
        for c, oc in zip(mine, theirs, strict=True):
            seccomp = _SECCOMP_CONTAINER + str(c.get("name"))
            if c.get("image") != oc.get("image") or notes.get(seccomp) != old_notes.get(seccomp):
                return True
    before = {str(c.get("name")): c for c in old_spec.get("ephemeralContainers") or []}
    for c in spec.get("ephemeralContainers") or []:
        oc = before.get(str(c.get("name")))
        if oc is None or c.get("image") != oc.get("image"):
            return True
    return False


def _template(rt: ResourceType, obj: Obj) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """The pod (metadata, spec) a write creates or describes, or None for other kinds."""
    if rt.group == "" and rt.plural == "pods":
        return obj.get("metadata") or {}, obj.get("spec") or {}
    spec = obj.get("spec") or {}
    if (rt.group, rt.plural) == ("batch", "cronjobs"):
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    elif (rt.group, rt.plural) not in _WORKLOADS:
        return None
    if rt.plural == "podtemplates":
        template = obj.get("template") or {}
    else:
        template = spec.get("template") or {}
    return template.get("metadata") or {}, template.get("spec") or {}


def pod_security(store: Store) -> Admission:
    def check(rt: ResourceType, old: Obj | None, new: Obj) -> None:
        if not rt.builtin:
            return
        if rt.group == "" and rt.plural == "namespaces":
            _check_namespace(old, new)
            return
        pod = _template(rt, new)
        if pod is None:
            return
        is_pod = rt.plural == "pods"
        if is_pod and old is not None and not significant_update(old, new):
            return
        meta = new.get("metadata") or {}
        ns_obj = store.get("namespaces", "", str(meta.get("namespace") or ""))
        policy = namespace_policy(_labels(ns_obj.obj if ns_obj else None))[0]
        enforce, warn = policy["enforce"], policy["warn"]
        if is_pod and enforce[0] != "privileged":
            found = violations(enforce[0], *pod)
            if found:
                raise forbidden_error(
                    rt.plural,
                    rt.group,
                    str(meta.get("name") or ""),
                    f'violates PodSecurity "{enforce[0]}:{enforce[1]}": {", ".join(found)}',
                )
        if warn[0] != "privileged":
            found = violations(warn[0], *pod)
            if found:
                admitting.warn(
                    f'would violate PodSecurity "{warn[0]}:{warn[1]}": {", ".join(found)}'
                )

    return check
