"""Per-kind strategies: the defaults and validation one kind gets on create and update (pods,
services, Deployments, Jobs, Events, CRDs), as kube-apiserver's `pkg/registry/<group>/<kind>`
strategies apply them (docs/design.md §8)."""
