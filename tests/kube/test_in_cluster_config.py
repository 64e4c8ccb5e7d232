"""In-cluster configuration: what a pod's kubelet provides (KUBERNETES_SERVICE_*, the mounted
service-account token, CA and namespace) is what the client uses, and it is used only then.
The deployed operator proves it end to end (tests/devcluster/test_process_deployed_operator.py);
here the choice of source and its precedence."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from raycluster_operator.kube import config as kube_config
from raycluster_operator.kube.config import in_cluster_config, load_config


def service_account(tmp_path: Path, namespace: str = "ops") -> Path:
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("the-token\n")
    (sa / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    (sa / "namespace").write_text(namespace)
    return sa


ENV = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "6443"}


def test_a_pod_gets_its_server_token_file_ca_and_namespace(tmp_path: Path) -> None:
    sa = service_account(tmp_path)
    config = in_cluster_config(sa, ENV)
    assert config is not None
    assert config.cluster.server == "https://10.0.0.1:6443"
    assert config.cluster.certificate_auth == str(sa / "ca.crt")
    # The file, not its content: a rotated (bound) token is read again.
    assert config.user.token_file == str(sa / "token") and config.user.token is None
    assert config.namespace == "ops"


def test_an_ipv6_service_host_is_bracketed(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    config = in_cluster_config(service_account(tmp_path), env)
    assert config is not None and config.cluster.server == "https://[fd00::1]:443"


@pytest.mark.parametrize("missing", ["KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "token"])
def test_outside_a_pod_there_is_no_in_cluster_config(tmp_path: Path, missing: str) -> None:
    sa = service_account(tmp_path)
    env = {k: v for k, v in ENV.items() if k != missing}
    if missing == "token":
        (sa / "token").unlink()
    assert in_cluster_config(sa, env) is None


def test_an_explicit_kubeconfig_wins_then_in_cluster_then_kubeconfig_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sa = service_account(tmp_path)
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    monkeypatch.setattr(kube_config, "SERVICE_ACCOUNT_DIR", sa)
    monkeypatch.setenv("KUBECONFIG", str(path))
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    assert load_config(kubeconfig).cluster.server == "https://127.0.0.1:1"
    assert load_config(str(path)).cluster.server == "https://127.0.0.1:1"
    assert load_config().cluster.server == "https://10.0.0.1:6443"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert load_config().cluster.server == "https://127.0.0.1:1"
