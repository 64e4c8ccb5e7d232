"""KubeRay's own e2e tests, unmodified, against an operator on a dev cluster: ours on either
control plane, or KubeRay's own (the reference). `make kuberay-e2e` runs the whole matrix and
prints a table; `tests/kuberay/test_kuberay_e2e.py` holds the expected outcomes.

    python -m tests.kuberay.e2e_run [--operator ours|kuberay] [--control-plane embedded|kubernetes]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from devkube import DevCluster
from devkube.addons.kuberay import KubeRayOperator, e2e
from raycluster_operator.devcluster.attach import install_crd, operator_attached
from tests.harness.cluster import FAST_KUBELET, stop_dev_cluster

#: Room for the largest test (1 head and 12 workers of 300m CPU and 1 GB each).
NODES = ("cpu:2",)
OURS, KUBERAY = "ours", "kuberay"
#: The matrix the README reports: ours on both backends, KubeRay's on the real one.
MATRIX = ((OURS, "embedded"), (OURS, "kubernetes"), (KUBERAY, "kubernetes"))


async def run_against(
    operator: str,
    control_plane: str,
    tests: Sequence[str] = e2e.NO_RAY,
    *,
    logs: Path | None = None,
) -> list[e2e.Outcome]:
    """One dev cluster with one operator (ours with our CRDs; KubeRay's with its kustomize
    base), and the tests run against it; the Go output (and KubeRay's log) go to ``logs``."""
    logs = logs or Path(tempfile.mkdtemp(prefix="kuberay-e2e-"))
    logs.mkdir(parents=True, exist_ok=True)
    kuberay = KubeRayOperator() if operator == KUBERAY else None
    cluster = DevCluster(
        nodes=list(NODES),
        kubelet_delay=FAST_KUBELET,
        control_plane=control_plane,
        addons=[kuberay] if kuberay else [],
    )
    try:
        await cluster.start()
        if kuberay is None:
            await install_crd(cluster)
        async with operator_attached(cluster, enabled=kuberay is None):
            kubeconfig = cluster.write_kubeconfig(logs / "kubeconfig")
            return await e2e.run(
                kubeconfig, tests, log=logs / f"go-test-{operator}-{control_plane}.log"
            )
    finally:
        if kuberay is not None and kuberay.log_path.exists():
            (logs / f"kuberay-operator-{control_plane}.log").write_bytes(
                kuberay.log_path.read_bytes()
            )
        await stop_dev_cluster(cluster)


def table(results: dict[tuple[str, str], list[e2e.Outcome]]) -> str:
    columns = list(results)
    names = [o.test for o in next(iter(results.values()))]
    head = ["test", *(f"{op} on {plane}" for op, plane in columns)]
    rows = [head, ["---"] * len(head)]
    for i, name in enumerate(names):
        cells = []
        for column in columns:
            outcome = results[column][i]
            cells.append(f"{outcome.result} ({outcome.seconds:.0f} s)")
        rows.append([name, *cells])
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.kuberay.e2e_run")
    parser.add_argument("--operator", choices=(OURS, KUBERAY))
    parser.add_argument("--control-plane", choices=("embedded", "kubernetes"))
    parser.add_argument("--run", nargs="*", default=list(e2e.NO_RAY), help="test names")
    parser.add_argument("--logs", type=Path, default=Path(tempfile.mkdtemp(prefix="kuberay-e2e-")))
    args = parser.parse_args(argv)
    matrix = [
        (op, plane)
        for op, plane in MATRIX
        if args.operator in (None, op) and args.control_plane in (None, plane)
    ] or [(args.operator or OURS, args.control_plane or "embedded")]
    results = {}
    for op, plane in matrix:
        print(f"[kuberay e2e] {len(args.run)} tests against {op} on {plane} ...", file=sys.stderr)
        results[(op, plane)] = asyncio.run(run_against(op, plane, args.run, logs=args.logs))
    print(table(results))
    print(f"(Go output and logs in {args.logs})", file=sys.stderr)
    return 0 if all(o.result == "PASS" for r in results.values() for o in r) else 1


if __name__ == "__main__":
    sys.exit(main())
