"""The streaming protocols Kubernetes speaks for `kubectl logs`, `exec`, `attach` and
`port-forward`, shared by the two servers that speak them (docs/design.md §8.2): the dev API
server (`devkube.server.endpoints`) and the kubelet API that kube-apiserver proxies to
(`devkube.kubelet.api`). Neither server imports the other; both import this.
"""
