"""A request and its answer across the worker boundary (worker/_web_server.py,
comfyui/_web_proxy.py), both ends in this process over a real Unix socket: a pack's aiohttp
handlers served by the worker's app on its own thread, ComfyUI's side forwarding to them."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import FormData, test_utils, web

from comfy_orch.comfyui import _web_proxy
from comfy_orch.worker import _web_server

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _serve_in_worker(tmp_path: Path, table: web.RouteTableDef) -> str:
    """The worker's side: `table` served on a listening socket made as the host makes it."""
    path = str(tmp_path / "w.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    specs = _web_server.route_specs(table, listener.detach(), [])
    assert all(spec.route["aiohttp"] for spec in specs)
    return path


def _ask(socket_path: str, routes: list[tuple[str, str]],
         requests: Callable[[test_utils.TestClient], Awaitable[Any]]) -> Any:
    """ComfyUI's side: each (method, path) forwarded to `socket_path`, asked by `requests`."""
    async def run() -> Any:
        app = web.Application()
        for method, path in routes:
            app.router.add_route(method, path, _web_proxy.handler(
                web, {"socket": socket_path, "env": "demo-env", "method": method, "path": path}))
        async with test_utils.TestClient(test_utils.TestServer(app)) as client:
            return await requests(client)
    return asyncio.run(run())


def test_the_handler_gets_a_real_request_and_its_answer_comes_back_whole(tmp_path: Path) -> None:
    table = web.RouteTableDef()
    data = os.urandom(300_000)
    (tmp_path / "f.bin").write_bytes(data)

    @table.get("/p/item/{name}/{rest:.*}")
    async def item(request: web.Request) -> web.StreamResponse:
        return web.json_response({"match_info": dict(request.match_info),
                                  "query": dict(request.query),
                                  "cookie": request.cookies.get("c"),
                                  "header": request.headers.get("X-H")}, status=203,
                                 headers={"X-Back": "yes"})

    @table.post("/p/form")
    async def form(request: web.Request) -> web.StreamResponse:
        fields = await request.post()
        upload = fields["f"]
        assert isinstance(upload, web.FileField)
        return web.json_response({"name": upload.filename, "size": len(upload.file.read()),
                                  "note": fields["note"]})

    @table.get("/p/file")
    async def file(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(tmp_path / "f.bin")

    @table.get("/p/stream")
    async def stream(request: web.Request) -> web.StreamResponse:
        answer = web.StreamResponse()
        await answer.prepare(request)
        for i in range(3):
            await answer.write(b"%d;" % i)
        await answer.write_eof()
        return answer

    path = _serve_in_worker(tmp_path, table)

    async def requests(client: test_utils.TestClient) -> dict[str, Any]:
        got: dict[str, Any] = {}
        r = await client.get("/p/item/a%20b/c/d?x=1", headers={"X-H": "h", "Cookie": "c=v"})
        got["item"] = (r.status, r.headers.get("X-Back"), await r.json())
        form_data = FormData()
        form_data.add_field("note", "n")
        form_data.add_field("f", b"x" * 70_000, filename="f.png")
        r = await client.post("/p/form", data=form_data)
        got["form"] = await r.json()
        r = await client.get("/p/file", headers={"Range": "bytes=10-19"})
        got["range"] = (r.status, await r.read())
        r = await client.get("/p/file")
        got["file"] = (r.headers.get("Content-Length"), hashlib.sha256(await r.read()).digest())
        r = await client.get("/p/stream")
        got["stream"] = await r.read()
        return got

    got = _ask(path, [("GET", "/p/item/{name}/{rest:.*}"), ("POST", "/p/form"),
                      ("GET", "/p/file"), ("GET", "/p/stream")], requests)
    assert got["item"] == (203, "yes", {"match_info": {"name": "a b", "rest": "c/d"},
                                        "query": {"x": "1"}, "cookie": "v", "header": "h"})
    assert got["form"] == {"name": "f.png", "size": 70_000, "note": "n"}
    assert got["range"] == (206, data[10:20])
    assert got["file"] == (str(len(data)), hashlib.sha256(data).digest())
    assert got["stream"] == b"0;1;2;"


def test_a_worker_that_does_not_answer_is_a_502_naming_its_env(tmp_path: Path) -> None:
    async def requests(client: test_utils.TestClient) -> tuple[int, Any]:
        r = await client.get("/p/x")
        return r.status, await r.json()

    status, body = _ask(str(tmp_path / "gone.sock"), [("GET", "/p/x")], requests)
    assert status == 502
    assert "the worker of env demo-env, which serves /p/x, did not answer" in body["error"]


def test_routes_are_not_served_without_a_socket(caplog: pytest.LogCaptureFixture) -> None:
    table = web.RouteTableDef()

    @table.get("/p/x")
    async def x(request: web.Request) -> web.StreamResponse:
        return web.Response()

    assert _web_server.route_specs(table, None, []) == []
    assert "the host gave this worker no web socket" in caplog.text


def test_a_static_directory_is_said_not_served_and_an_unused_socket_is_closed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    table = web.RouteTableDef()
    table.static("/p/files", str(tmp_path))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "w.sock"))
    listener.listen()
    fd = listener.detach()
    assert _web_server.route_specs(table, fd, []) == []
    assert "of this pack is not served: only routes with a method cross" in caplog.text
    with pytest.raises(OSError):
        os.fstat(fd)  # closed
