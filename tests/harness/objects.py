"""A Kubernetes object as the tests read and write it: decoded JSON.

Tests speak to both products (the operator's client and the dev cluster's API) and compare
what each shows, so they name the shape once here rather than borrowing either product's own
alias (``raycluster_operator.api.objects.Obj``, ``kubefacts.objects.Obj``).
"""

from __future__ import annotations

from typing import Any

#: A Kubernetes object (or any JSON object of the API) as decoded JSON.
Obj = dict[str, Any]
