"""A Kubernetes object as JSON, as the dev cluster stores, serves and watches it.

Objects stay plain dicts on the wire, in the store and in the caches: a field no code models
must survive a round trip. This is the one name for that shape in the dev cluster (the
operator declares its own once, in ``raycluster_operator/api/objects.py``).
"""

from __future__ import annotations

from typing import Any

#: A Kubernetes object (or any JSON object of the API) as decoded JSON.
Obj = dict[str, Any]
