"""The one test harness: every world (operator, hardening, e2e, Ray's clients, the dev cluster's
own tests) is built from these pieces and extends them in a few lines.

- ``cluster``: start/stop a dev cluster with options (nodes, runtime simulated/process, CRDs,
  DevCluster's timings and faults), a loop thread for synchronous clients, CA/kubeconfig files.
- ``operator``: attach the operator (`Manager` as ``run`` builds it) with flat options, wait
  for its caches, stop it (drain) or crash it (cancel).
- ``world``: `DevWorld`, a cluster + admin client + operators; `open_world` as a block.
- ``kubectl``: the real kubectl (admin, a ServiceAccount, or a private environment).
- ``waiting``: `eventually`. ``pods``: what tests read off pods. ``manifests``: RayClusters,
  groups and CRDs. ``examples``: the repository's examples and deploy/.
Fault injection is the dev cluster's own (``world.cluster.faults``) plus
`RunningOperator.crash` and, in the process runtime, killing a pod's process (tests/e2e).
- the worlds, each `DevWorld` with its timings, nodes and helpers: ``operator_world``
  (tests/operator), ``hardening_world`` (a checker of invariants; tests/hardening and the soak
  benchmark), ``ray_world`` (real Ray on the process runtime; tests/e2e).
Import it as ``tests.harness...`` (pytest puts the repository root on the path).
"""
