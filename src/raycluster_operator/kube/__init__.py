"""kube layer."""
