"""Core and events.k8s.io Events share storage; strict field validation for custom resources."""

from __future__ import annotations

from typing import Any

import pytest

from devkube.server import ApiServer
from devkube.server.errors import ApiError
from devkube.server.registry.selectors import Selection, parse_field_selector
from devkube.server.registry.strategies.events import field_alias
from devkube.server.schema import structural


def rt(server: ApiServer, group: str, plural: str) -> Any:
    found = server.registry.get(group, "v1", plural)
    assert found is not None
    return found


def test_events_written_as_events_k8s_io_read_as_core() -> None:
    server = ApiServer()
    new = rt(server, "events.k8s.io", "events")
    core = rt(server, "", "events")
    server.objects.create(
        new,
        "default",
        {
            "metadata": {"name": "e1"},
            "regarding": {"kind": "Pod", "name": "p", "namespace": "default", "uid": "u1"},
            "note": "pulled",
            "reason": "Pulled",
            "type": "Normal",
            "action": "Pull",
            "reportingController": "ctl",
            "reportingInstance": "ctl-1",
            "eventTime": "2026-01-01T00:00:00.000000Z",
        },
    )
    stored = server.objects.get(core, "default", "e1")
    as_core = server.objects.view(core, stored)
    assert as_core["apiVersion"] == "v1"
    assert as_core["involvedObject"]["name"] == "p" and as_core["message"] == "pulled"
    assert as_core["reportingComponent"] == "ctl"
    as_new = server.objects.view(new, stored)
    assert as_new["apiVersion"] == "events.k8s.io/v1"
    assert as_new["regarding"]["uid"] == "u1" and as_new["note"] == "pulled"
    assert "involvedObject" not in as_new

    by_uid = Selection("default", (), parse_field_selector("involvedObject.uid=u1", "events"))
    assert [s.obj["metadata"]["name"] for s in server.objects.list(core, by_uid)] == ["e1"]
    by_regarding = Selection(
        "default", (), parse_field_selector("regarding.name=p", "events", field_alias)
    )
    assert len(server.objects.list(new, by_regarding)) == 1


def test_strict_field_validation_rejects_unknown_custom_fields() -> None:
    server = ApiServer()
    crds = rt(server, "apiextensions.k8s.io", "customresourcedefinitions")
    server.objects.create(
        crds,
        None,
        {
            "metadata": {"name": "things.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "things", "kind": "Thing"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "properties": {
                                    "spec": {
                                        "type": "object",
                                        "properties": {"a": {"type": "string"}},
                                    }
                                },
                            }
                        },
                    }
                ],
            },
        },
    )
    things = rt(server, "example.com", "things")
    body = {"metadata": {"name": "t"}, "spec": {"a": "x", "typo": 1}}
    with pytest.raises(ApiError) as strict:
        server.objects.create(
            things, "default", body, fields=structural.FieldValidation(structural.STRICT)
        )
    assert strict.value.code == 400 and 'unknown field "spec.typo"' in strict.value.message
    created = server.objects.create(things, "default", body)  # default: prune silently
    assert created.obj["spec"] == {"a": "x"}
