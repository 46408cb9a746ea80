"""A pack's ROUTES on ComfyUI's server (comfyui/_routes.py): which paths are served, and how a
request's body is read before it reaches the worker. ComfyUI's server is aiohttp's (Debian's
python3-aiohttp, scripts/install-deps); the app here is served on a loopback port."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any, cast

import pytest
from aiohttp import test_utils, web

from comfy_orch.comfyui import _routes
from comfy_orch.host import Host


class _Host:
    """The host's call as a route uses it: records each body and answers {"got": body}."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []

    def call(self, class_type: str, inputs: dict[str, str], kind: str) -> tuple[str]:
        body = json.loads(inputs["body"])
        self.bodies.append(body)
        return (json.dumps({"got": body, "class_type": class_type}),)


MiB = 1 << 20


def _route(method: str, path: str) -> dict[str, Any]:
    return {"env": "orchpack", "method": method, "path": path, "module": "orchpack",
            "handler": "h", "class_type": "orch.route:%s %s" % (method, path)}


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> web.RouteTableDef:
    """ComfyUI's `server.PromptServer.instance.routes` while packs load, with one route of
    ComfyUI's own registered before them (as PromptServer's constructor registers its routes)."""
    routes = web.RouteTableDef()

    @routes.get("/")
    async def index(request: web.Request) -> web.Response:
        return web.Response(text="comfyui index")

    server = ModuleType("server")
    setattr(server, "PromptServer", type("PromptServer", (), {
        "instance": type("Instance", (), {"routes": routes})()}))
    monkeypatch.setitem(sys.modules, "server", server)
    return routes


def _served(table: web.RouteTableDef) -> list[str]:
    """The pack's routes in the table (ComfyUI's own "/" left out)."""
    return sorted("%s %s" % (r.method, r.path) for r in table
                  if isinstance(r, web.RouteDef) and r.path != "/")


def _ask(table: web.RouteTableDef,
         talk: Callable[[test_utils.TestClient], Awaitable[Any]]) -> Any:
    """`talk` with ComfyUI's app on a loopback port: the table added once packs have loaded,
    then what ComfyUI adds after it (main.py): its web root's files and every pack's
    /extensions/<pack>/ files."""

    async def late(request: web.Request) -> web.Response:
        return web.Response(text="comfyui's own " + request.path)

    async def run() -> Any:
        app = web.Application(client_max_size=100 * MiB)  # ComfyUI's --max-upload-size
        app.add_routes(table)
        app.router.add_get("/index.html", late)
        app.router.add_get("/extensions/otherpack/main.js", late)
        app.router.add_get("/comfyui/late/{x}", late)
        async with test_utils.TestClient(test_utils.TestServer(app)) as client:
            return await talk(client)

    return asyncio.run(run())


async def _answer(reply: Any) -> tuple[int, Any]:
    text = await reply.text()
    try:
        return reply.status, json.loads(text)
    except ValueError:
        return reply.status, text


def test_a_catch_all_route_is_not_served_and_comfyuis_routes_answer_as_their_own(
        table: web.RouteTableDef, caplog: pytest.LogCaptureFixture) -> None:
    host = _Host()
    _routes.serve(cast(Host, host), [_route("GET", "/{anything:.*}"), _route("GET", "/{x}"),
                                     _route("GET", "/{x}/{y}/{z}"), _route("GET", "/c{x}"),
                                     _route("GET", "/orchpack/{rest:[^?]*}"),
                                     _route("GET", "/orchpack/{name}")])
    assert _served(table) == ["GET /orchpack/{name}"]

    async def talk(client: test_utils.TestClient) -> list[tuple[int, Any]]:
        return [await _answer(await client.get(p)) for p in (
            "/", "/index.html", "/extensions/otherpack/main.js", "/comfyui/late/1",
            "/orchpack/thing", "/orchpack/a/b")]

    assert _ask(table, talk) == [
        (200, "comfyui index"), (200, "comfyui's own /index.html"),
        (200, "comfyui's own /extensions/otherpack/main.js"),
        (200, "comfyui's own /comfyui/late/1"),
        (200, {"got": {}, "class_type": "orch.route:GET /orchpack/{name}"}),
        (404, "404: Not Found")]
    for path, why in (("/{anything:.*}", "its first segment is not literal"),
                      ("/{x}/{y}/{z}", "its first segment is not literal"),
                      ("/orchpack/{rest:[^?]*}", "{rest:[^?]*}: [^?] can match '/'")):
        line = "route GET %s of env orchpack is not served: %s" % (path, why)
        assert line in caplog.text, line
    assert "give the route a literal prefix of its own such as /<pack>/" in caplog.text


@pytest.mark.parametrize("path, why", [
    ("/", "it has no first segment"),
    ("/{x}", "its first segment is not literal"),
    ("/{x}/{y}", "its first segment is not literal"),
    ("/p{x}/y", "its first segment is not literal"),
    ("/extensions/{pack}/{file}", "ComfyUI serves every pack's web files there"),
    ("/p/{x:.*}", "{x:.*}: . can match '/'"),
    ("/p/{x:.+}", "{x:.+}: . can match '/'"),
    ("/p/{x:(.*)}", "{x:(.*)}: groups and alternation are not allowed"),
    ("/p/{x:[\\W]+}", "{x:[\\W]+}: [\\W] can match '/'"),
    ("/p/{x:[!-~]+}", "{x:[!-~]+}: [!-~] can match '/'"),
    ("/p/{x:\\S+}", "{x:\\S+}: \\S can match '/'"),
    ("/p/{x:a/b}", "{x:a/b}: / can match '/'"),
    ("/p/{x:(a+)+b}", "{x:(a+)+b}: groups and alternation are not allowed"),
    ("/p/{x:(?:a|aa)b}", "groups and alternation are not allowed"),
    ("/p/{x:a|b}", "groups and alternation are not allowed"),
    ("/p/{x:\\d*?}", "a quantifier follows a quantifier"),
    ("/p/{x:\\d++}", "a quantifier follows a quantifier"),
    ("/p/{x:*a}", "a quantifier follows no character or class"),
    ("/p/{x:a\\1}", "\\1 (a backreference, anchor or other escape) is not allowed"),
    ("/p/{x:\\bword}", "\\b (a backreference, anchor or other escape) is not allowed"),
    ("/p/{x:^a$}", "^ (an anchor) is not allowed"),
    ("/p/{x:[a}", "an unclosed character class"),
    ("/p/{x:[[a]]}", "'[' inside a class is not allowed"),
    ("/p/{x:a{}}", "{} is no count"),
    ("/p/{x:a?a?a?aaa}", "one part of variable length"),
    ("/p/{x:\\d+}{y}", "one part of variable length"),
    ("/p/{w}x{h}", "one part of variable length"),
    ("/p/{1x}", "a brace outside a {name} or {name:regex} variable"),
])
def test_a_path_that_can_shadow_or_backtrack_is_refused(path: str, why: str) -> None:
    refusal = _routes.path_refusal(path)
    assert refusal is not None and why in refusal, (path, refusal)


@pytest.mark.parametrize("path", [
    "/orchpack/echo", "/orchpack", "/orchpack/{name}", "/orchpack/{name}/{file}.png",
    "/orchpack/{id:\\d+}", "/orchpack/{id:[0-9a-f]{8}}-{rest}", "/orchpack/{v:v\\d{1,3}}",
    "/orchpack/{name:[\\w.-]+}", "/orchpack/{x:a\\.b*}", "/orchpack/{x:[^/]+}/{y}",
    "/orchpack/{x:[]a]+}",
])
def test_a_path_under_a_literal_prefix_with_one_segment_variables_is_served(path: str) -> None:
    assert _routes.path_refusal(path) is None


def test_a_backtracking_pattern_is_refused_before_any_request(
        table: web.RouteTableDef, caplog: pytest.LogCaptureFixture) -> None:
    # {x:(a+)+b} had cost 9 s of CPU per 36-byte request in aiohttp's route matching.
    _routes.serve(cast(Host, _Host()), [_route("GET", "/orchpack/{x:(a+)+b}"),
                                        _route("GET", "/orchpack/{a}{b}{c}")])
    assert _served(table) == []
    assert "route GET /orchpack/{x:(a+)+b} of env orchpack is not served: {x:(a+)+b}: groups " \
        "and alternation are not allowed" in caplog.text
    assert "route GET /orchpack/{a}{b}{c} of env orchpack is not served: a segment holds more " \
        "than one part of variable length" in caplog.text


class _Body:
    """A request's body as aiohttp's StreamReader gives it (`read(n)`: at most n bytes, b"" at
    its end): `size` bytes, spaces and then `tail`, made as they are read; counts what the
    handler read."""

    def __init__(self, size: int, tail: bytes = b"") -> None:
        self.size, self.tail, self.consumed = size, tail, 0

    async def read(self, n: int = -1) -> bytes:
        assert 0 < n <= 1 << 20, "the handler reads the body in pieces, never whole"
        start = self.consumed
        self.consumed = min(start + n, self.size)
        head = self.size - len(self.tail)
        spaces = max(0, min(self.consumed, head) - start)
        return b" " * spaces + self.tail[max(0, start - head):max(0, self.consumed - head)]


def _handler(table: web.RouteTableDef, host: _Host, path: str = "/orchpack/post") -> Any:
    _routes.serve(cast(Host, host), [_route("POST", path)])
    (route,) = [r for r in table if isinstance(r, web.RouteDef) and r.path == path]
    return route.handler


def _call(handler: Any, body: _Body, headers: dict[str, str]) -> tuple[int, Any]:
    request = test_utils.make_mocked_request("POST", "/orchpack/post", headers=headers,
                                             payload=body)
    reply = asyncio.run(handler(request))
    return reply.status, json.loads(reply.body)


def test_a_body_declared_over_the_cap_is_refused_unread(table: web.RouteTableDef) -> None:
    host = _Host()
    body = _Body(99 * MiB)
    status, answer = _call(_handler(table, host), body, {"Content-Length": str(99 * MiB)})
    assert (status, body.consumed, host.bodies) == (413, 0, [])
    assert answer == {"error": "the body is over 1048576 bytes, the most a route's call carries"}


def test_a_chunked_body_is_refused_once_past_the_cap(table: web.RouteTableDef) -> None:
    host = _Host()
    body = _Body(99 * MiB)
    status, _ = _call(_handler(table, host), body, {"Transfer-Encoding": "chunked"})
    assert status == 413 and host.bodies == []
    assert MiB < body.consumed <= MiB + (64 << 10)  # read no further than a piece past the cap


def test_a_body_at_the_cap_reaches_the_worker(table: web.RouteTableDef) -> None:
    host = _Host()
    body = _Body(MiB, b'{"at": "the cap"}')
    status, _ = _call(_handler(table, host), body, {"Content-Length": str(MiB)})
    assert (status, body.consumed, host.bodies) == (200, MiB, [{"at": "the cap"}])


def test_bodies_over_the_cap_are_refused_by_a_served_route(table: web.RouteTableDef) -> None:
    host = _Host()
    _handler(table, host)

    async def chunks() -> Any:
        for _ in range(32):
            yield b" " * (64 << 10)

    async def talk(client: test_utils.TestClient) -> list[tuple[int, Any]]:
        return [await _answer(await client.post("/orchpack/post", data=b" " * (MiB + 1))),
                await _answer(await client.post("/orchpack/post", data=chunks())),
                await _answer(await client.post("/orchpack/post", json={"a": [1]}))]

    answers = _ask(table, talk)
    assert [status for status, _ in answers] == [413, 413, 200]
    assert host.bodies == [{"a": [1]}]


@pytest.mark.parametrize("data, headers, error", [
    (b"[" * 100000 + b"]" * 100000, {}, "Invalid JSON: nested too deeply"),
    (b'{"a": ' * 100000, {}, "Invalid JSON: nested too deeply"),
    (b"{not json", {}, "Invalid JSON"),
    (b"\xff\xfe{}", {}, "Invalid JSON: the body is not utf-8 text"),
    (b"{}", {"Content-Type": "application/json; charset=no-such"},
     "Invalid JSON: the body's charset 'no-such' is unknown"),
])
def test_a_body_that_is_not_json_is_answered_400(
        table: web.RouteTableDef, data: bytes, headers: dict[str, str], error: str) -> None:
    host = _Host()
    _handler(table, host)

    async def talk(client: test_utils.TestClient) -> tuple[int, Any]:
        return await _answer(await client.post("/orchpack/post", data=data, headers=headers))

    assert _ask(table, talk) == (400, {"error": error})
    assert host.bodies == []


@pytest.mark.parametrize("path, why", [
    ("/p/{rest:.*}", None),
    ("/p/{name}/{rest:.+}", None),
    ("/p/{rest:.*}/end", "{rest:.*}: . can match '/'"),
    ("/p/{a:.*}{b:.*}", "{a:.*}: . can match '/'"),
    ("/api/{rest:.*}", "{rest:.*} under /api/ answers ComfyUI's own routes"),
    ("/ws/{x}", "{x} under /ws/ answers ComfyUI's own routes"),
    ("/{rest:.*}", "its first segment is not literal"),
    ("/p/{rest:(a+)+}", "groups and alternation are not allowed"),
])
def test_an_aiohttp_routes_catch_all_is_served_only_at_its_end_under_its_own_prefix(
        path: str, why: str | None) -> None:
    refusal = _routes.path_refusal(path, tail_catch_all=True)
    assert refusal is None if why is None else why in str(refusal), refusal
