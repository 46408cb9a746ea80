"""A worker's HTTP routes on ComfyUI's own server (docs/comfyui.md, "A pack's HTTP routes"), as
comfy-env 0.4.46 serves a pack's `ROUTES`: each route the host lists for an env becomes an
aiohttp handler on `server.PromptServer.instance.routes`, registered while the pack loads (main.py
adds that table to its app after every pack has loaded). The handler sends the request's JSON
body to the worker, where the pack's function runs, and answers its JSON; `"_status"` in the
answer is the HTTP status.

Unlike comfy-env, a request without a body (a GET) sends its query parameters as the body, and a
failed call (or a `_status` that is not an HTTP status) answers 502 with the worker's error: the
route exists, what is behind it failed.

A request and ComfyUI's objects are aiohttp's and ComfyUI's, not type-checked here: Any."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

from ..host import Host, NodeError

_log = logging.getLogger("comfy_orch")


def serve(host: Host, routes: list[dict[str, Any]]) -> None:
    """Registers each route on ComfyUI's server; one that cannot be is said in the log."""
    if not routes:
        return
    server = sys.modules.get("server")
    instance = getattr(getattr(server, "PromptServer", None), "instance", None)
    table = getattr(instance, "routes", None)
    try:
        import aiohttp.web as web
    except ImportError:
        web = None  # type: ignore[assignment]  # said below: ComfyUI without aiohttp
    if table is None or web is None:
        _log.warning("[comfy-orch] %d route(s) of env %s are not served: %s", len(routes),
                     routes[0].get("env"), "ComfyUI's PromptServer has no instance yet"
                     if web is not None else "aiohttp is not importable")
        return
    # A path aiohttp refuses, or a route ComfyUI (or a pack) already has, would stop ComfyUI
    # when main.py adds the table to its app: each is tried on a router of its own first.
    taken = {(getattr(r, "method", ""), getattr(r, "path", "")) for r in table}
    for route in routes:
        method, path = str(route.get("method")), str(route.get("path"))
        register: Any = getattr(table, method.lower(), None)
        why = None
        if not callable(register):
            why = "ComfyUI's route table has no %s" % method.lower()
        elif (method, path) in taken:
            why = "ComfyUI's server already has this route"
        else:
            try:
                web.UrlDispatcher().add_route(method, path, _handler(host, web, route))
            except (ValueError, RuntimeError) as exc:
                why = "aiohttp refuses the path: %s" % exc
        if why is not None:
            _log.warning("[comfy-orch] route %s %s of env %s is not served: %s", method, path,
                         route.get("env"), why)
            continue
        taken.add((method, path))
        register(path)(_handler(host, web, route))
        _log.info("[comfy-orch] route %s %s -> %s.%s in env %s", method, path,
                  route.get("module"), route.get("handler"), route.get("env"))


def _handler(host: Host, web: Any, route: dict[str, Any]) -> Any:
    class_type = str(route.get("class_type"))

    async def proxy(request: Any) -> Any:
        if request.body_exists:
            try:
                body = await request.json()
            except ValueError:
                return web.json_response({"error": "Invalid JSON"}, status=400)
        else:
            body = dict(request.query)
        loop = asyncio.get_running_loop()
        try:
            outputs = await loop.run_in_executor(
                None, host.call, class_type, {"body": json.dumps(body)}, "route")
        except NodeError as exc:
            _log.warning("[comfy-orch] route %s %s failed in env %s: %s", route.get("method"),
                         route.get("path"), route.get("env"), exc)
            return web.json_response({"error": exc.message, "type": exc.code}, status=502)
        answer = json.loads(outputs[0]) if outputs and isinstance(outputs[0], str) else None
        status = answer.pop("_status", 200) if isinstance(answer, dict) else 200
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            return web.json_response({"error": "the route's handler answered _status %r, not an "
                                      "HTTP status" % (status,)}, status=502)
        return web.json_response(answer, status=status)

    proxy.__qualname__ = "comfy_orch route %s %s" % (route.get("method"), route.get("path"))
    return proxy
