"""`raycluster-operator run`: the public flags reach the right option sections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from raycluster_operator.cli import main
from raycluster_operator.cli import run as run_module
from raycluster_operator.controller.manager import ManagerOptions

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [{"name": "x", "user": {"token": "t"}}],
    "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
    "current-context": "x",
}


def options_of(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ManagerOptions:
    """Run the command up to the point where it would start serving."""
    captured: list[ManagerOptions] = []

    async def serve(client: Any, options: ManagerOptions) -> None:
        captured.append(options)
        await client.close()

    monkeypatch.setattr(run_module, "_serve", serve)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(KUBECONFIG))
    result = CliRunner().invoke(main, ["run", f"--kubeconfig={path}", *args])
    assert result.exit_code == 0, result.output
    (options,) = captured
    return options


def test_every_flag_reaches_its_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "op-0")
    monkeypatch.setenv("ENABLE_RANDOM_POD_DELETE", "true")
    options = options_of(
        [
            "--namespace=a",
            "--namespace=b",
            "--metrics-addr=",
            "--health-addr=127.0.0.1:9",
            "--no-leader-elect",
            "--lease-namespace=ops",
            "--lease-name=lease",
            "--reconcile-concurrency=7",
            "--feature-gates=RayMultiHostIndexing=false",
            "--resync-period=42",
        ],
        tmp_path,
        monkeypatch,
    )
    assert options.sources.namespaces == ("a", "b")
    assert options.controller.reconcile_concurrency == 7
    assert options.controller.resync_period == 42.0
    assert options.serving.metrics_addr is None
    assert options.serving.health_addr == "127.0.0.1:9"
    assert options.serving.leader_elect is False
    assert (options.serving.lease_namespace, options.serving.lease_name) == ("ops", "lease")
    assert options.serving.identity == "op-0"
    assert options.planning.multi_host_indexing is False
    assert options.planning.random_pod_delete is True


def test_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAME", raising=False)
    monkeypatch.delenv("ENABLE_RANDOM_POD_DELETE", raising=False)
    monkeypatch.setattr(run_module, "POD_NAMESPACE_FILE", str(tmp_path / "absent"))
    options = options_of([], tmp_path, monkeypatch)
    defaults = ManagerOptions()
    assert options.sources == defaults.sources
    assert options.controller == defaults.controller
    assert options.planning == defaults.planning
    assert options.serving.lease_namespace == "default"
    assert (options.serving.metrics_addr, options.serving.health_addr) == (":8080", ":8082")
    assert options.serving.leader_elect is True


def test_namespace_takes_kuberays_comma_separated_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = options_of(["--namespace=a,b", "--namespace=c"], tmp_path, monkeypatch)
    assert options.sources.namespaces == ("a", "b", "c")
