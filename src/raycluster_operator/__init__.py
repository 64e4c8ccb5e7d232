"""raycluster-operator: a KubeRay-compatible operator that owns multi-host Ray worker groups."""

__version__ = "0.1.0"

#: The value of `app.kubernetes.io/created-by` on everything the operator creates.
OPERATOR_NAME = "raycluster-operator"
