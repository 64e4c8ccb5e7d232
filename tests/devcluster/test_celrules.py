"""``devkube.server.schema.cel.rules`` without a server: the parts of kube-apiserver's CEL behaviour
the kubectl tests do not reach (ratcheting, list-map correlation, evaluation errors, the
Kubernetes libraries left out, the compile cache)."""

from __future__ import annotations

from typing import Any

from devkube.server.schema.cel import rules

IMMUTABLE = {"rule": "self == oldSelf", "message": "immutable"}


def obj(spec: Any) -> dict[str, Any]:
    return {"spec": spec}


def schema(spec: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": spec}}


def test_an_unchanged_value_is_ratcheted_a_changed_one_is_not() -> None:
    s = schema({"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 3"}]})
    assert rules.validate(s, obj("long"), None)  # create: refused
    assert rules.validate(s, obj("long"), obj("long")) == []  # unchanged: ratcheted
    assert rules.validate(s, obj("longer"), obj("long"))  # changed: refused


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
    assert rules.validate(keyed, moved, old) == []
    changed = obj([{"name": "b", "size": 3}, {"name": "a", "size": 1}])
    assert rules.validate(keyed, changed, old) == [
        ("spec[0].size", "Invalid value: 3: immutable", "FieldValueInvalid")
    ]
    atomic = schema({"type": "array", "items": item})
    assert rules.validate(atomic, changed, old) == []  # no old value to compare with


def test_an_evaluation_error_is_worded_as_cel_go_words_it() -> None:
    s = schema({"type": "object", "x-kubernetes-validations": [{"rule": "self.a == 1"}]})
    assert rules.validate(s, obj({}), None) == [
        (
            "spec",
            'Invalid value: "object": no such key: a evaluating rule: self.a == 1',
            "FieldValueInvalid",
        )
    ]


def problems(rule: str, node: str = "object") -> list[rules.Cause]:
    s = schema({"type": node, "x-kubernetes-validations": [{"rule": rule}]})
    return rules.crd_problems({"spec": {"versions": [{"schema": {"openAPIV3Schema": s}}]}})


def answers(rule: str, value: Any, node: str = "object") -> bool:
    """Whether ``rule`` holds for ``value`` (an evaluation error is a failure)."""
    s = schema({"type": node, "x-kubernetes-validations": [{"rule": rule}]})
    assert problems(rule, node) == [], rule
    return rules.validate(s, obj(value), None) == []


def test_a_function_no_library_declares_refuses_the_crd() -> None:
    """kube-apiserver compiles every rule against the libraries it registers; a function
    outside them (a misspelling, semver, authz) is an ``undeclared reference``."""
    for rule in ("isUrl(self.u)", "format.size() > 0", "url(self.u) && self.x.nope()"):
        ((_, message, _),) = problems(rule)
        assert "compilation failed: ERROR: <input>:1:" in message, rule
    ((_, message, _),) = problems("isSemver(self.v)")
    assert "undeclared reference to 'isSemver'" in message
    ((_, message, _),) = problems("self.x.nope()")
    assert "undeclared reference to 'nope'" in message


def test_the_lists_library() -> None:
    assert answers("self.isSorted() && self.sum() == 6", [1, 2, 3], "array")
    assert not answers("self.isSorted()", [3, 1], "array")
    assert answers("self.min() == 1 && self.max() == 3", [3, 1, 2], "array")
    assert answers("self.indexOf(2) == 1 && self.lastIndexOf(2) == 3", [1, 2, 3, 2], "array")
    assert answers("self.indexOf(9) == -1", [1], "array")
    assert answers("['b', 'a'].sum() == ''", [], "array") is False  # no sum of strings
    assert answers("self.url.lastIndexOf('/') > 7", {"url": "https://x/y"})  # the string one
    s = schema({"type": "array", "x-kubernetes-validations": [{"rule": "self.min() > 0"}]})
    ((_, message, _),) = rules.validate(s, obj([]), None)
    assert (
        message
        == 'Invalid value: "array": min called on empty list evaluating rule: self.min() > 0'
    )


def test_the_sets_library_uses_cel_equality() -> None:
    assert answers("sets.contains(self, [1, 2])", [2, 1, 3], "array")
    assert not answers("sets.contains(self, [4])", [1], "array")
    assert answers("sets.equivalent(self, [2, 1, 1])", [1, 2], "array")
    assert answers("sets.intersects(self, [1.0])", [1], "array")  # 1 == 1.0 in CEL
    assert not answers("sets.intersects(self, [true])", [1], "array")  # true != 1 in CEL


def test_the_ip_cidr_and_url_libraries() -> None:
    assert answers("isIP(self) && ip(self).family() == 6", "2001:db8::1", "string")
    assert not answers("ip.isCanonical(self)", "2001:DB8::1", "string")
    assert answers("ip(self).isGlobalUnicast()", "10.1.2.3", "string")  # Go's sense
    assert answers(
        "!ip(self).isGlobalUnicast() && ip(self).isLinkLocalUnicast()", "169.254.0.1", "string"
    )
    assert answers("ip('127.0.0.1').isLoopback() && ip('::').isUnspecified()", "", "string")
    assert answers(
        "cidr(self).containsIP('10.9.8.7') && cidr(self).prefixLength() == 8",
        "10.0.0.1/8",
        "string",
    )
    assert answers("string(cidr(self).masked()) == '10.0.0.0/8'", "10.0.0.1/8", "string")
    assert answers("cidr(self).containsCIDR(cidr('10.1.0.0/16'))", "10.0.0.0/8", "string")
    assert not answers("cidr(self).containsCIDR('10.0.0.0/7')", "10.0.0.0/8", "string")
    assert not answers("isCIDR(self)", "10.0.0.0/33", "string")
    assert answers("ip(self) == ip('2001:db8::1')", "2001:DB8:0::1", "string")
    url = "https://user@[::1]:8443/a%20b?x=1&x=2"
    rule = (
        "url(self).getScheme() == 'https' && url(self).getHost() == '[::1]:8443' && "
        "url(self).getHostname() == '::1' && url(self).getPort() == '8443' && "
        "url(self).getEscapedPath() == '/a%20b' && url(self).getQuery()['x'] == ['1', '2']"
    )
    assert answers(rule, url, "string")
    assert not answers("isURL(self)", "example.com", "string")
    s = schema({"type": "string", "x-kubernetes-validations": [{"rule": "ip(self).family() == 4"}]})
    ((_, message, _),) = rules.validate(s, obj("::ffff:1.2.3.4"), None)
    assert message == (
        'Invalid value: "string": IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed '
        "evaluating rule: ip(self).family() == 4"
    )


def test_the_format_and_regex_libraries() -> None:
    assert answers("!format.dns1123Label().validate(self).hasValue()", "my-name", "string")
    assert not answers("!format.dns1123Label().validate(self).hasValue()", "My_Name", "string")
    assert answers("format.named('labelValue').value().validate(self).hasValue()", "a b", "string")
    assert answers("!format.named('nope').hasValue()", "", "string")
    assert answers("!format.dns1123LabelPrefix().validate(self).hasValue()", "job-", "string")
    assert answers(
        "!format.uuid().validate(self).hasValue()", "123e4567-e89b-12d3-a456-426614174000", "string"
    )
    assert answers(
        "format.qualifiedName().validate(self).value()[0] == 'prefix part must be non-empty'",
        "/x",
        "string",
    )
    assert answers(
        "self.find('[0-9]+') == '12' && self.findAll('[a-z]') == ['a', 'b']", "a12b3", "string"
    )
    assert answers("self.findAll('[0-9]', 2) == ['1', '2']", "a12b3", "string")
    rule = {
        "rule": "!format.dns1123Label().validate(self).hasValue()",
        "messageExpression": "format.dns1123Label().validate(self).value()[0]",
    }
    s = schema({"type": "string", "x-kubernetes-validations": [rule]})
    ((_, message, _),) = rules.validate(s, obj("A"), None)
    assert message == (
        "Invalid value: a lowercase RFC 1123 label must consist of lower case "
        "alphanumeric characters or '-', and must start and end with an alphanumeric character "
        "(e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    )


def test_the_quantity_library_compares_exactly() -> None:
    checks = [
        {"rule": "isQuantity(self)", "message": "not a quantity"},
        {
            "rule": "!isQuantity(self) || quantity(self).isLessThan(quantity('1Gi'))",
            "messageExpression": "'at most 1Gi, not ' + self",
        },
        {"rule": "!isQuantity(self) || quantity(self).add(quantity('1m')).sign() == 1"},
    ]
    s = schema({"type": "string", "x-kubernetes-validations": checks})
    assert rules.validate(s, obj("1023Mi"), None) == []
    assert rules.validate(s, obj("1Gi"), None) == [
        ("spec", "Invalid value: at most 1Gi, not 1Gi", "FieldValueInvalid")
    ]
    assert [c[1] for c in rules.validate(s, obj("lots"), None)] == [
        'Invalid value: "lots": not a quantity'
    ]
    assert rules.validate(s, obj("-1m"), None)[0][1].endswith("sign() == 1")


def test_rules_compile_once_per_schema_object() -> None:
    s = schema({"type": "string", "x-kubernetes-validations": [IMMUTABLE]})
    assert rules.validator(s) is rules.validator(s)
    assert rules.validator(s) is not rules.validator(schema(s["properties"]["spec"]))


def test_a_rule_that_is_not_a_bool_refuses_the_crd() -> None:
    s = schema({"type": "string", "x-kubernetes-validations": [{"rule": "self + 'x'"}]})
    crd = {"spec": {"versions": [{"schema": {"openAPIV3Schema": s}}]}}
    ((path, message, _),) = rules.crd_problems(crd)
    assert (
        path == "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    )
    assert message.endswith(": cel expression must evaluate to a bool")
