"""What legitimately differs between two clusters answering the same request, and is replaced
by a placeholder before the answers are compared (docs/differential.md lists these):

- uids (`metadata.uid`, owner references, `controller-uid` labels, uids in messages): any
  RFC 4122 string becomes `<uid>`;
- times (creation, deletion, managedFields, conditions, start and completion times): any
  RFC 3339 string becomes `<time>`;
- resourceVersions (objects, lists, owner references, the numbers in a 410 message) become
  `<rv>`, and list `continue` tokens `<continue>`;
- generated names: PREFIX+5 characters of the name generator's alphabet, where PREFIX is a
  `generateName` seen in any answer, the name of any object seen followed by `-` (a Job's
  pods), or kube-api-access-, becomes PREFIX+`<gen>`;
- `metadata.managedFields[].time` falls under times; the rest of managedFields (manager,
  operation, fieldsV1) is compared as it is.

Nothing else is normalised: names, namespaces, node names and every defaulted field are the
same on both clusters by construction and compared as they are.
"""

from __future__ import annotations

import re
from typing import Any

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")
#: The resource versions in messages: `too old resource version: 12 (345)`,
#: `resourceVersion 12`, `the resourceVersion for the provided watch is too old`.
RV_IN_MESSAGE = re.compile(r"(resource ?version[^0-9\n]{0,4})\d+(?: \(\d+\))?", re.IGNORECASE)
#: k8s.io/apiserver's name generator: 5 characters of this alphabet (no vowels, no 0 1 3).
GENERATED = "[bcdfghjklmnpqrstvwxz2456789]{5}"
ALWAYS_GENERATED = ("kube-api-access-",)


class Normaliser:
    """One per cluster: it learns the generateName prefixes that cluster's answers show."""

    def __init__(self) -> None:
        self.prefixes: set[str] = set(ALWAYS_GENERATED)
        self._pattern: re.Pattern[str] | None = None

    def learn(self, answer: Any) -> None:
        """Remember every generateName of an answer (an object, a list, watch events)."""
        if isinstance(answer, dict):
            meta = answer.get("metadata")
            if isinstance(meta, dict):
                # A generateName, and NAME- for any name (a Job's pods are NAME-xxxxx).
                for prefix in (meta.get("generateName"), f"{meta.get('name')}-"):
                    if isinstance(prefix, str) and prefix not in self.prefixes:
                        self.prefixes.add(prefix)
                        self._pattern = None
            for value in answer.values():
                if isinstance(value, (dict, list)):
                    self.learn(value)
        elif isinstance(answer, list):
            for value in answer:
                self.learn(value)

    def _names(self) -> re.Pattern[str]:
        if self._pattern is None:
            alternatives = "|".join(re.escape(p) for p in sorted(self.prefixes, key=len)[::-1])
            self._pattern = re.compile(f"(?<![a-z0-9.-])({alternatives}){GENERATED}(?![a-z0-9-])")
        return self._pattern

    def text(self, value: str) -> str:
        value = UUID.sub("<uid>", value)
        value = TIME.sub("<time>", value)
        value = RV_IN_MESSAGE.sub(r"\1<rv>", value)
        return self._names().sub(r"\1<gen>", value)

    def body(self, value: Any) -> Any:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key == "resourceVersion" and isinstance(item, str) and item:
                    out[key] = "<rv>"
                elif key == "continue" and isinstance(item, str) and item:
                    out[key] = "<continue>"
                elif key == "message" and isinstance(item, str):
                    out[key] = self.text(item)
                else:
                    out[self.text(key) if "-" in key else key] = self.body(item)
            return out
        if isinstance(value, list):
            return [self.body(v) for v in value]
        if isinstance(value, str):
            value = UUID.sub("<uid>", value)
            value = TIME.sub("<time>", value)
            return self._names().sub(r"\1<gen>", value)
        return value
