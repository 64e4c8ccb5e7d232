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
The old module paths (waiting, kubectl_bin, kubectl_as, pod_facts, devkube_testing,
operator_harness, hardening_world, e2e.ray_world) re-export from here.
"""
