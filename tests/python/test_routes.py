"""A pack's ROUTES as the worker reads them (worker/_routes.py): which entries become route
classes, what each one refused is said to be, and what a route class does with a body."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from comfy_orch.worker import _routes


@pytest.fixture
def pack() -> Iterator[ModuleType]:
    """A pack module `orchpack` with a submodule `orchpack.api`, both in sys.modules."""
    top, api = ModuleType("orchpack"), ModuleType("orchpack.api")
    sys.modules["orchpack"], sys.modules["orchpack.api"] = top, api
    yield top
    del sys.modules["orchpack"], sys.modules["orchpack.api"]


def test_routes_of_the_module_and_its_submodules_become_route_classes(pack: ModuleType) -> None:
    api = sys.modules["orchpack.api"]
    setattr(pack, "ROUTES", [{"method": "get", "path": "/a", "handler": "a"}])
    setattr(pack, "a", lambda body: {"a": body})
    setattr(api, "ROUTES", [{"path": "/b", "handler": "b"}])  # POST, comfy-env's default
    setattr(api, "b", lambda body: {"_status": 201})
    specs = _routes.route_specs(pack)
    assert [s.class_type for s in specs] == ["orch.route:GET /a", "orch.route:POST /b"]
    schema = json.loads(specs[1].schema_json())
    assert schema["orch_route"] == {"method": "POST", "path": "/b", "module": "orchpack.api",
                                    "handler": "b"}
    assert "node_info_text" not in schema  # never an /object_info entry
    assert [i.name for i in specs[0].inputs] == ["body"] and specs[0].return_types == ["STRING"]
    assert specs[0].call("route", {"body": '{"q": 1}'}) == ('{"a": {"q": 1}}',)
    assert specs[0].call("route", {"body": ""}) == ('{"a": {}}',)


def test_an_async_handler_is_awaited(pack: ModuleType) -> None:
    async def handler(body: dict[str, object]) -> dict[str, object]:
        return {"awaited": body}
    setattr(pack, "ROUTES", [{"path": "/async", "handler": "handler"}])
    setattr(pack, "handler", handler)
    (spec,) = _routes.route_specs(pack)
    assert spec.call("route", {"body": "[]"}) == ('{"awaited": []}',)


def test_entries_that_cannot_be_served_are_left_out_and_said(
        pack: ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    setattr(pack, "ok", lambda body: {})
    setattr(pack, "ROUTES", [
        {"method": "TRACE", "path": "/t", "handler": "ok"},
        {"path": "no-slash", "handler": "ok"},
        {"path": "/with space", "handler": "ok"},
        {"path": "/missing", "handler": "absent"},
        {"path": "/elsewhere", "handler": "ok", "module": "not.imported"},
        "not a dict",
        {"path": "/ok", "handler": "ok"},
        {"path": "/ok", "handler": "ok"},
    ])
    assert [s.class_type for s in _routes.route_specs(pack)] == ["orch.route:POST /ok"]
    for why in ("its method is none of", "its path is not a URL path",
                "its handler 'absent' is not a function of orchpack",
                "its handler 'ok' is not a function of not.imported",
                "is not a dict with method, path and handler",
                "an earlier entry declares the same method and path"):
        assert why in caplog.text, why


def test_an_answer_that_is_not_json_fails_the_call(pack: ModuleType) -> None:
    setattr(pack, "ROUTES", [{"path": "/nan", "handler": "nan"}])
    setattr(pack, "nan", lambda body: {"x": float("nan")})
    (spec,) = _routes.route_specs(pack)
    with pytest.raises(ValueError):
        spec.call("route", {"body": "{}"})
