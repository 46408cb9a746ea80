"""ComfyUI's `PromptServer.instance` inside a worker (docs/comfyui.md, "A pack's web side").

ComfyUI builds its server before it loads any pack, so packs read `PromptServer.instance`
while they import: to add HTTP routes, to send messages to the browser. In a worker nobody
builds one: ComfyUI's own class then has no `instance` at all, and a pack that checks
`PromptServer.instance is None` dies with an AttributeError. The worker gives the class an
instance as soon as the pack imports `server`:

- `routes`: aiohttp's own `web.RouteTableDef`, as ComfyUI's is. What a pack registers there is
  served from this worker (_web_server.py) at the same path of ComfyUI's server (under
  `launch`) or of `comfy-orch serve`. Without aiohttp in the env, a recorder that says in the
  log that each route is not served.
- `send_sync`, `send`, `send_json`, `send_progress_text`: ComfyUI's, reaching its clients
  through the host (_messages.py).
- `client_id`: the client of the prompt whose node runs (or ran last), as ComfyUI sets it when a
  prompt starts; None before any.

Any other member raises an AttributeError that names what a worker has."""

from __future__ import annotations

import logging
import struct

from .._shared import import_hooks
from . import _messages

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import ModuleType
    from typing import Any, NoReturn

    # An aiohttp handler: a pack's coroutine function, never called in a worker.
    Handler = Callable[..., Any]

_log = logging.getLogger("comfy_orch")
_METHODS = ("get", "post", "put", "patch", "delete", "head", "options", "view")
TEXT = 3  # ComfyUI's BinaryEventTypes.TEXT


def install() -> None:
    """`server.PromptServer.instance` as soon as the pack imports ComfyUI's server module."""
    import_hooks.after_import("server", _give_instance)


def _give_instance(server: ModuleType) -> None:
    cls = getattr(server, "PromptServer", None)
    if isinstance(cls, type) and getattr(cls, "instance", None) is None:
        setattr(cls, "instance", instance())  # ComfyUI's class attribute, by name


_instance: WorkerPromptServer | None = None


def instance() -> WorkerPromptServer:
    global _instance
    if _instance is None:
        _instance = WorkerPromptServer()
    return _instance


def registered_routes() -> Any:
    """What the pack registered on PromptServer.instance.routes (nothing if it never asked)."""
    return _instance._routes if _instance is not None and _instance._routes is not None else []


def route_table() -> Any:
    """aiohttp's RouteTableDef, or the recorder where the env has no aiohttp."""
    try:
        from aiohttp import web
    except ImportError:
        return UnservedRoutes()
    return web.RouteTableDef()


def begin_call(client_id: object) -> None:
    """A node's call begins: `client_id` is its prompt's client (the call's hidden value)."""
    if isinstance(client_id, str) and client_id:
        instance().client_id = client_id


class UnservedRoutes:
    """aiohttp's RouteTableDef decorators (`@routes.get(path)`, `routes.route(method, path)`)
    for an env without aiohttp: each registration is said in the log, not served."""

    def __init__(self) -> None:
        self.registered: list[tuple[str, str]] = []

    def route(self, method: str, path: str, **kwargs: Any) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.registered.append((method.upper(), path))
            _log.warning("[comfy-orch] %s %s registered by %s is not served: this env has no "
                         "aiohttp to serve it with; add aiohttp to the env's requirements "
                         "(docs/comfyui.md)", method.upper(), path,
                         getattr(handler, "__qualname__", handler))
            return handler
        return register

    def __getattr__(self, name: str) -> Callable[..., Callable[[Handler], Handler]]:
        if name in _METHODS:
            return lambda path, **kwargs: self.route(name, path, **kwargs)
        raise AttributeError("PromptServer.instance.routes.%s is not available in a worker "
                             "without aiohttp: only its route decorators are" % name)

    def __iter__(self) -> Iterator[object]:
        return iter(())


class WorkerPromptServer:
    client_id: str | None = None
    last_node_id: str | None = None

    def __init__(self) -> None:
        self._routes: Any = None

    @property
    def routes(self) -> Any:
        """Made when a pack first asks: aiohttp is not imported for packs that never do."""
        if self._routes is None:
            self._routes = route_table()
        return self._routes

    def send_sync(self, event: str | int, data: object, sid: str | None = None) -> None:
        _messages.send(event, data, sid)

    async def send(self, event: str | int, data: object, sid: str | None = None) -> None:
        _messages.send(event, data, sid)

    async def send_json(self, event: str, data: object, sid: str | None = None) -> None:
        _messages.send(event, data, sid)

    def send_progress_text(self, text: str | bytes, node_id: str,
                           sid: str | None = None) -> None:
        """ComfyUI's TEXT message: the node id's length (4 bytes, big-endian), the id, the text."""
        raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        node = str(node_id).encode("utf-8")
        _messages.send(TEXT, struct.pack(">I", len(node)) + node + raw, sid)

    def __getattr__(self, name: str) -> NoReturn:
        raise AttributeError("PromptServer.instance.%s is not available in a worker: it has "
                             "routes, send_sync, send, send_json, send_progress_text, client_id "
                             "and last_node_id" % name)
