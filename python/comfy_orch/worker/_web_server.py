"""A pack's aiohttp routes, served from its worker (docs/comfyui.md, "A pack's aiohttp routes").

What the pack registers on `PromptServer.instance.routes` (aiohttp's RouteTableDef,
_prompt_server.py) is served here by aiohttp itself, on the listening socket the host made for
this worker (--web-fd): each handler gets a real `web.Request` (its method, path, match_info,
query, headers, cookies and a body it reads as it likes) and answers with any aiohttp response
(`json_response`, `FileResponse` with its Range and conditional requests, `StreamResponse`),
streamed. ComfyUI's process (under `launch`) and `comfy-orch serve` forward each request of the
route's path to this socket unchanged and stream the answer back.

The app is ComfyUI's own arrangement of a pack's routes: each at its path and at "/api" + its
path, with ComfyUI's body cap. Its loop runs on a thread of its own, as ComfyUI's server loop is
not the thread its nodes run on: a slow handler holds up neither the node calls nor the host.

Each route reaches the host as a class of the node set (RouteSpec, marked "aiohttp") that no
prompt can name, as a ROUTES entry does, so the host knows its method and path and reports a
clash between envs."""

from __future__ import annotations

import logging
import os
import socket
import threading

from . import _routes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_log = logging.getLogger("comfy_orch")
_BODY_CAP = 100 << 20  # ComfyUI's --max-upload-size default (MB), its app's client_max_size


def route_specs(table: Any, fd: int | None,
                declared: list[_routes.RouteSpec]) -> list[_routes.RouteSpec]:
    """Serves `table` on listening socket `fd` and returns a RouteSpec for each route served;
    nothing when there is no route or no socket (said in the log). A method and path the pack's
    ROUTES list (`declared`) has already is that list's: the first registration answers, as in
    ComfyUI."""
    first = {s.class_type: s.route for s in declared}
    defs = []
    for r in table:
        if not (hasattr(r, "method") and hasattr(r, "path")):
            _log.warning("[comfy-orch] %r of this pack is not served: only routes with a method "
                         "cross (a static directory does not; serve its files from a GET route "
                         "answering a FileResponse, docs/comfyui.md)", r)
            continue
        earlier = first.get(_routes.CLASS_PREFIX + r.method.upper() + " " + r.path)
        if earlier is not None:
            _log.warning("[comfy-orch] route %s %s registered by %s is not served: %s.ROUTES "
                         "declares it first, and the first registration answers", r.method,
                         r.path, getattr(r.handler, "__qualname__", r.handler), earlier["module"])
            continue
        defs.append(r)
    if not defs:
        if fd is not None:
            os.close(fd)  # nothing to serve: a request there is refused, never left waiting
        return []
    if fd is None:
        _log.warning("[comfy-orch] %d aiohttp route(s) of this pack are not served: the host gave "
                     "this worker no web socket (see the host's log)", len(defs))
        return []
    served = _start(defs, fd)
    specs = []
    for r in served:
        handler = getattr(r, "handler", None)
        spec = _routes.RouteSpec(r.method.upper(), r.path, getattr(handler, "__module__", "?"),
                                 getattr(handler, "__qualname__", "?"), _not_a_node)
        spec.route["aiohttp"] = True
        specs.append(spec)
    return specs


def _not_a_node(body: Any) -> Any:
    raise RuntimeError("an aiohttp route is served over HTTP, not called as a node")


def _start(defs: list[Any], fd: int) -> list[Any]:
    """The app on its own loop and thread; the routes it took (one aiohttp refuses, such as a
    second handler for the same method and path, is said in the log and left out)."""
    from aiohttp import web
    app = web.Application(client_max_size=_body_cap())
    served = []
    for r in defs:
        try:
            for path in (r.path, "/api" + r.path):  # a GET answers HEAD too, as aiohttp's
                web.RouteDef(r.method, path, r.handler, dict(r.kwargs)).register(app.router)
        except (ValueError, RuntimeError, TypeError) as exc:
            _log.warning("[comfy-orch] route %s %s is not served: %s", r.method, r.path, exc)
            continue
        served.append(r)
    started = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        import asyncio
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            loop.run_until_complete(runner.setup())
            site = web.SockSite(runner, socket.socket(fileno=fd))
            loop.run_until_complete(site.start())
        except BaseException as exc:  # noqa: B902 - said by the caller
            failure.append(exc)
            started.set()
            return
        started.set()
        loop.run_forever()

    threading.Thread(target=run, name="comfy_orch web", daemon=True).start()
    started.wait()
    if failure:
        _log.warning("[comfy-orch] the pack's aiohttp routes are not served: %s", failure[0])
        return []
    _log.info("[comfy-orch] serving %d aiohttp route(s) of this pack", len(served))
    return served


def _body_cap() -> int:
    """ComfyUI's own cap, where its arguments reached this worker (comfyui_args)."""
    import sys
    args = getattr(sys.modules.get("comfy.cli_args"), "args", None)
    megabytes = getattr(args, "max_upload_size", None)
    return int(megabytes * 1024 * 1024) if isinstance(megabytes, (int, float)) else _BODY_CAP
