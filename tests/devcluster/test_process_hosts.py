from __future__ import annotations

from typing import Any

from devkube.process.hosts import PodRecord, hosts_file, pod_record


def svc(
    name: str, selector: dict[str, str], *, headless: bool = False, ns: str = "ml", **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"selector": selector, **spec}
    if headless:
        body["clusterIP"] = "None"
    return {"metadata": {"name": name, "namespace": ns}, "spec": body}


def rec(name: str, ip: str, *, ready: bool = True, ns: str = "ml", **kw: Any) -> PodRecord:
    return PodRecord(namespace=ns, name=name, ip=ip, ready=ready, **kw)


def lookup(text: str, name: str) -> list[str]:
    """Every address a hosts file gives `name`, in file order."""
    found = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        ip, *names = line.split()
        if name in names:
            found.append(ip)
    return found


ME = rec("client", "127.1.0.2")
HEAD = rec("head", "127.1.0.3", labels={"role": "head"})
W0 = rec("w0", "127.1.0.4", labels={"role": "w"}, hostname="g-0-0", subdomain="c-headless")
W1 = rec(
    "w1", "127.1.0.5", labels={"role": "w"}, hostname="g-0-1", subdomain="c-headless", ready=False
)


def test_own_names_resolve_to_own_ip() -> None:
    text = hosts_file(W0, [W0], [])
    assert lookup(text, "g-0-0") == ["127.1.0.4"]
    assert lookup(text, "g-0-0.c-headless.ml.svc.cluster.local") == ["127.1.0.4"]
    assert lookup(text, "localhost") == ["127.0.0.1", "::1"]
    assert lookup(hosts_file(ME, [ME], []), "client") == ["127.1.0.2"]


def test_cluster_ip_service_names_resolve_to_a_ready_endpoint() -> None:
    text = hosts_file(ME, [ME, HEAD], [svc("c-head-svc", {"role": "head"})])
    for name in (
        "c-head-svc",
        "c-head-svc.ml",
        "c-head-svc.ml.svc",
        "c-head-svc.ml.svc.cluster.local",
    ):
        assert lookup(text, name) == ["127.1.0.3"], name


def test_service_without_ready_endpoint_does_not_resolve() -> None:
    not_ready = rec("head", "127.1.0.3", labels={"role": "head"}, ready=False)
    terminating = rec("head", "127.1.0.3", labels={"role": "head"}, terminating=True)
    for pod in (not_ready, terminating):
        assert lookup(hosts_file(ME, [ME, pod], [svc("s", {"role": "head"})]), "s") == []


def test_short_service_name_only_in_own_namespace() -> None:
    other = rec("client", "127.1.0.9", ns="other")
    text = hosts_file(other, [other, HEAD], [svc("s", {"role": "head"})])
    assert lookup(text, "s") == []
    assert lookup(text, "s.ml") == ["127.1.0.3"]


def test_selector_is_namespaced() -> None:
    stranger = rec("head", "127.1.0.8", labels={"role": "head"}, ns="other")
    assert lookup(hosts_file(ME, [ME, stranger], [svc("s", {"role": "head"})]), "s") == []


def test_headless_service_gives_pod_names_and_honours_not_ready_flag() -> None:
    pods = [ME, W0, W1]
    strict = hosts_file(ME, pods, [svc("c-headless", {"role": "w"}, headless=True)])
    assert lookup(strict, "g-0-0.c-headless") == ["127.1.0.4"]
    assert lookup(strict, "g-0-1.c-headless") == []
    assert lookup(strict, "c-headless") == ["127.1.0.4"]
    loose = hosts_file(
        ME, pods, [svc("c-headless", {"role": "w"}, headless=True, publishNotReadyAddresses=True)]
    )
    assert lookup(loose, "g-0-1.c-headless") == ["127.1.0.5"]
    assert lookup(loose, "g-0-1.c-headless.ml.svc.cluster.local") == ["127.1.0.5"]
    assert lookup(loose, "c-headless") == ["127.1.0.4", "127.1.0.5"]


def test_pod_names_need_a_matching_headless_service() -> None:
    assert lookup(hosts_file(ME, [ME, W0], []), "g-0-0.c-headless") == []
    named_other = [svc("other", {"role": "w"}, headless=True)]
    assert lookup(hosts_file(ME, [ME, W0], named_other), "g-0-0.c-headless") == []


def test_output_is_deterministic_whatever_the_input_order() -> None:
    services = [svc("b", {"role": "w"}, headless=True), svc("a", {"role": "head"})]
    one = hosts_file(ME, [ME, HEAD, W0], services)
    two = hosts_file(ME, [W0, HEAD, ME], list(reversed(services)))
    assert one == two


def test_pod_record_reads_a_pod_object() -> None:
    pod = {
        "metadata": {
            "name": "p",
            "namespace": "ml",
            "labels": {"a": "b"},
            "deletionTimestamp": "x",
        },
        "spec": {"hostname": "h", "subdomain": "s"},
        "status": {"podIP": "127.1.0.1", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    r = pod_record(pod)
    assert (r.ip, r.ready, r.terminating, r.host, r.subdomain) == (
        "127.1.0.1",
        True,
        True,
        "h",
        "s",
    )
    assert pod_record(pod, ip="127.1.0.9").ip == "127.1.0.9"
    assert pod_record({"metadata": {"name": "q"}}).host == "q"
