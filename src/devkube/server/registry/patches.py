"""The four PATCH flavours the API server accepts.

json-patch keeps one quirk of the real server on purpose: Kubernetes applies JSON patches
with evanphx/json-patch v4, whose `replace` on a missing key of an object behaves like `add`
(the library's "does the key exist" check never fails for objects). Ray's autoscaler relies
on that when it replaces `/spec/workerGroupSpecs/<i>/scaleStrategy` on a group that has none,
so we rewrite such operations to `add` before handing the patch to the `jsonpatch` library.
Replacing a missing array index or a path whose parent is missing still fails (422).
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import jsonpatch
import jsonpointer

from devkube.server.errors import ApiError, bad_request

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


def _unprocessable(message: str) -> ApiError:
    return ApiError(422, "UnprocessableEntity", message)


def _replace_missing_as_add(doc: Any, ops: list[Any]) -> list[Any]:
    """Mirror json-patch v4: `replace` of an absent object member adds it."""
    out = []
    for op in ops:
        if isinstance(op, dict) and op.get("op") == "replace" and isinstance(op.get("path"), str):
            try:
                pointer = jsonpointer.JsonPointer(op["path"])
                parent, last = pointer.to_last(doc)
            except (jsonpointer.JsonPointerException, KeyError, IndexError, TypeError):
                out.append(op)
                continue
            if isinstance(parent, dict) and last not in parent:
                op = {**op, "op": "add"}
        out.append(op)
        # Later operations see the effect of earlier ones: track the document as we go.
        with contextlib.suppress(jsonpatch.JsonPatchException, jsonpointer.JsonPointerException):
            doc = jsonpatch.apply_patch(doc, [op])
    return out


def json_patch(doc: dict[str, Any], ops: Any) -> dict[str, Any]:
    if not isinstance(ops, list):
        raise bad_request("json patch must be a JSON array of operations")
    ops = _replace_missing_as_add(doc, ops)
    try:
        result = jsonpatch.apply_patch(doc, ops)
    except jsonpatch.JsonPatchTestFailed as exc:
        raise _unprocessable(
            f"the server rejected our request due to an error in our request: {exc}"
        ) from exc
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise _unprocessable(str(exc)) from exc
    except (TypeError, KeyError, IndexError) as exc:
        raise bad_request(f"invalid json patch: {exc}") from exc
    if not isinstance(result, dict):
        raise _unprocessable("json patch must leave an object")
    return result


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# Strategic merge: list fields merged by key, as declared by Kubernetes' Go struct tags. Keyed by
# field name alone, which is unambiguous for the kinds this server knows except `ports`.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "env": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "addresses": "type",
    "taints": "key",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "secrets": "name",
    "podIPs": "ip",
    "hostIPs": "ip",
    "ephemeralContainerStatuses": "name",
    "resourceClaimStatuses": "name",
    "volumesAttached": "name",
}
SET_LISTS = frozenset({"finalizers"})
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_SET_ORDER = "$setElementOrder/"


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        sample = next((i for i in items if isinstance(i, dict)), {})
        return "containerPort" if "containerPort" in sample else "port"
    return MERGE_KEYS.get(field)


def strategic_merge(original: Any, patch: Any) -> Any:
    """Strategic merge patch for built-in kinds (directives $patch, $retainKeys,
    $deleteFromPrimitiveList; $setElementOrder is accepted and ignored)."""
    if not isinstance(patch, dict) or not isinstance(original, dict):
        return _strip_directives(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip_directives({k: v for k, v in patch.items() if k != "$patch"})
    if directive == "delete":
        return None
    result = dict(original)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith(_SET_ORDER):
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE) :]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, dict):
            merged = strategic_merge(current if isinstance(current, dict) else {}, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(key, current if isinstance(current, list) else [], value)
        else:
            result[key] = value
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(field: str, current: list[Any], patch: list[Any]) -> list[Any]:
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [_strip_directives(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    if field in SET_LISTS:
        return current + [v for v in patch if v not in current]
    key = _merge_key(field, [*patch, *current])
    if key is None:
        return [_strip_directives(i) for i in patch]
    result = list(current)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            result.append(_strip_directives(item))
            continue
        index = next(
            (
                i
                for i, cur in enumerate(result)
                if isinstance(cur, dict) and cur.get(key) == item[key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append(_strip_directives(item))
        else:
            result[index] = strategic_merge(result[index], item)
    return result


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_directives(v)
            for k, v in value.items()
            if not (
                k.startswith("$patch") or k.startswith("$retainKeys") or k.startswith(_SET_ORDER)
            )
            and not k.startswith(_DELETE_PRIMITIVE)
        }
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value
