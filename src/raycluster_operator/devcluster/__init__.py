"""The operator composed with the dev cluster: the one package of the operator that imports
`devkube` (its facade only), so that `raycluster-operator dev`, the test harness and the
benchmarks attach or deploy the operator the same way (docs/design.md §1, §8.1).

- ``attach``: the operator's ServiceAccount kubeconfig, the operator attached in this process
  over HTTPS, or deployed as the dev overlay's pods; the CRD install.
- ``foreground``: `raycluster-operator dev`'s cluster in the foreground until a signal.
- ``watch``: the live view's loop (pods followed, the RAY column read off the runtime).
- ``live_view``, ``pod_table``: what the live view and the plain pod table draw (pure).

The operator still reaches the cluster only over HTTPS: nothing here hands it an in-process
object of the dev cluster.
"""
