"""``devkube.server.celrules`` without a server: the parts of kube-apiserver's CEL behaviour
the kubectl tests do not reach (ratcheting, list-map correlation, evaluation errors, the
Kubernetes libraries left out, the compile cache)."""

from __future__ import annotations

from typing import Any

from devkube.server import celrules

IMMUTABLE = {"rule": "self == oldSelf", "message": "immutable"}


def obj(spec: Any) -> dict[str, Any]:
    return {"spec": spec}


def schema(spec: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": spec}}


def test_an_unchanged_value_is_ratcheted_a_changed_one_is_not() -> None:
    s = schema({"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 3"}]})
    assert celrules.validate(s, obj("long"), None)  # create: refused
    assert celrules.validate(s, obj("long"), obj("long")) == []  # unchanged: ratcheted
    assert celrules.validate(s, obj("longer"), obj("long"))  # changed: refused


def test_list_map_items_correlate_by_key_atomic_lists_do_not() -> None:
    item = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "size": {"type": "integer", "x-kubernetes-validations": [IMMUTABLE]},
        },
    }
    keyed = schema(
        {
            "type": "array",
            "items": item,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        }
    )
    old = obj([{"name": "a", "size": 1}, {"name": "b", "size": 2}])
    moved = obj([{"name": "b", "size": 2}, {"name": "a", "size": 1}])
    assert celrules.validate(keyed, moved, old) == []
    changed = obj([{"name": "b", "size": 3}, {"name": "a", "size": 1}])
    assert celrules.validate(keyed, changed, old) == [
        ("spec[0].size", 'Invalid value: "integer": immutable', "FieldValueInvalid")
    ]
    atomic = schema({"type": "array", "items": item})
    assert celrules.validate(atomic, changed, old) == []  # no old value to compare with


def test_an_evaluation_error_is_worded_as_cel_go_words_it() -> None:
    s = schema({"type": "object", "x-kubernetes-validations": [{"rule": "self.a == 1"}]})
    assert celrules.validate(s, obj({}), None) == [
        (
            "spec",
            'Invalid value: "object": no such key: a evaluating rule: self.a == 1',
            "FieldValueInvalid",
        )
    ]


def test_other_kubernetes_libraries_are_accepted_and_not_checked() -> None:
    rule = {"rule": "isURL(self) && url(self).getScheme() == 'https'"}
    s = schema({"type": "string", "x-kubernetes-validations": [rule]})
    crd = {"spec": {"versions": [{"schema": {"openAPIV3Schema": s}}]}}
    assert celrules.crd_problems(crd) == []
    assert celrules.validate(s, obj("ftp://x"), None) == []


def test_only_a_kubernetes_library_call_skips_a_rule() -> None:
    """A field named like a library (``self.url``) or a string method the runtime has
    (``lastIndexOf``) is checked; a misspelt function still refuses the CRD."""

    def problems(rule: str) -> list[celrules.Cause]:
        s = schema({"type": "object", "x-kubernetes-validations": [{"rule": rule}]})
        return celrules.crd_problems({"spec": {"versions": [{"schema": {"openAPIV3Schema": s}}]}})

    for rule in (
        "format.dns1123Label().validate(self.n).hasValue()",
        "sets.contains(self.l, ['a'])",
        "self.l.isSorted() && self.l.indexOf(1) >= 0",
    ):
        assert problems(rule) == [], rule
    for rule in ("isUrl(self.u)", "format.size() > 0", "url(self.u) && self.x.nope()"):
        assert problems(rule), rule
    checked = schema(
        {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.url.startsWith('https://')", "message": "https only"},
                {"rule": "self.url.lastIndexOf('/') > 7", "message": "a path"},
            ],
        }
    )
    found = celrules.validate(checked, obj({"url": "ftp://x"}), None)
    assert [c[1] for c in found] == [
        'Invalid value: "object": https only',
        'Invalid value: "object": a path',
    ]
    dyn = schema(
        {"type": "object", "x-kubernetes-validations": [{"rule": "self.l.indexOf('a') == 0"}]}
    )
    assert celrules.validate(dyn, obj({"l": ["a"]}), None) == []  # a list's indexOf: skipped


def test_the_quantity_library_compares_exactly() -> None:
    rules = [
        {"rule": "isQuantity(self)", "message": "not a quantity"},
        {
            "rule": "!isQuantity(self) || quantity(self).isLessThan(quantity('1Gi'))",
            "messageExpression": "'at most 1Gi, not ' + self",
        },
        {"rule": "!isQuantity(self) || quantity(self).add(quantity('1m')).sign() == 1"},
    ]
    s = schema({"type": "string", "x-kubernetes-validations": rules})
    assert celrules.validate(s, obj("1023Mi"), None) == []
    assert celrules.validate(s, obj("1Gi"), None) == [
        ("spec", 'Invalid value: "string": at most 1Gi, not 1Gi', "FieldValueInvalid")
    ]
    assert [c[1] for c in celrules.validate(s, obj("lots"), None)] == [
        'Invalid value: "string": not a quantity'
    ]
    assert celrules.validate(s, obj("-1m"), None)[0][1].endswith("sign() == 1")


def test_rules_compile_once_per_schema_object() -> None:
    s = schema({"type": "string", "x-kubernetes-validations": [IMMUTABLE]})
    assert celrules.validator(s) is celrules.validator(s)
    assert celrules.validator(s) is not celrules.validator(schema(s["properties"]["spec"]))


def test_a_rule_that_is_not_a_bool_refuses_the_crd() -> None:
    s = schema({"type": "string", "x-kubernetes-validations": [{"rule": "self + 'x'"}]})
    crd = {"spec": {"versions": [{"schema": {"openAPIV3Schema": s}}]}}
    ((path, message, _),) = celrules.crd_problems(crd)
    assert (
        path == "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    )
    assert message.endswith(": cel expression must evaluate to a bool")
