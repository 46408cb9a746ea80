"""ComfyUI's `PromptServer.instance` inside a worker (docs/comfyui.md, "Worker limits").

ComfyUI builds its server before it loads any pack, so packs read `PromptServer.instance` while
they import: to add HTTP routes, to send messages to the browser. In a worker nobody builds one:
ComfyUI's own class then has no `instance` at all, and a pack that checks
`PromptServer.instance is None` dies with an AttributeError. The worker gives the class an
instance as soon as the pack imports `server`:

- `routes`: the decorators of aiohttp's route table. What a pack registers there is recorded and
  said in the log: an aiohttp handler is not served (a `ROUTES` list is: _routes.py).
- `send_sync`, `send_progress_text`: accepted; the message does not reach ComfyUI's clients, and
  the log says so once per event.
- `client_id`: None (no client is known in a worker).

Any other member raises an AttributeError that names what a worker has."""

from __future__ import annotations

import logging

from .._shared import import_hooks

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import ModuleType
    from typing import Any, NoReturn

    # An aiohttp handler: a pack's coroutine function, never called in a worker.
    Handler = Callable[..., Any]

_log = logging.getLogger("comfy_orch")
_METHODS = ("get", "post", "put", "patch", "delete", "head", "options", "view")


def install() -> None:
    """`server.PromptServer.instance` as soon as the pack imports ComfyUI's server module."""
    import_hooks.after_import("server", _give_instance)


def _give_instance(server: ModuleType) -> None:
    cls = getattr(server, "PromptServer", None)
    if isinstance(cls, type) and getattr(cls, "instance", None) is None:
        setattr(cls, "instance", WorkerPromptServer())  # ComfyUI's class attribute, by name


class WorkerRoutes:
    """aiohttp's RouteTableDef decorators (`@routes.get(path)`, `routes.route(method, path)`):
    each registration is kept in `registered` as (method, path) and said in the log."""

    def __init__(self) -> None:
        self.registered: list[tuple[str, str]] = []

    def route(self, method: str, path: str, **kwargs: Any) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.registered.append((method.upper(), path))
            _log.warning("[comfy-orch] %s %s registered by %s in a worker is not served: an "
                         "aiohttp handler cannot cross to ComfyUI's process; declare it in a "
                         "ROUTES list instead, whose handlers ComfyUI serves from this worker "
                         "(docs/comfyui.md)", method.upper(), path,
                         getattr(handler, "__qualname__", handler))
            return handler
        return register

    def __getattr__(self, name: str) -> Callable[..., Callable[[Handler], Handler]]:
        if name in _METHODS:
            return lambda path, **kwargs: self.route(name, path, **kwargs)
        raise AttributeError("PromptServer.instance.routes.%s is not available in a worker: "
                             "only its route decorators are" % name)

    def __iter__(self) -> Iterator[object]:
        return iter(())


class WorkerPromptServer:
    client_id = None
    last_node_id = None

    def __init__(self) -> None:
        self.routes = WorkerRoutes()
        self._said: set[str] = set()

    def send_sync(self, event: str, data: object, sid: str | None = None) -> None:
        self._not_forwarded("send_sync(%r)" % (event,))

    def send_progress_text(self, text: object, node_id: str | None,
                           sid: str | None = None) -> None:
        self._not_forwarded("send_progress_text")

    def _not_forwarded(self, what: str) -> None:
        if what not in self._said:
            self._said.add(what)
            _log.warning("[comfy-orch] PromptServer.instance.%s in a worker does not reach "
                         "ComfyUI's clients (said once)", what)

    def __getattr__(self, name: str) -> NoReturn:
        raise AttributeError("PromptServer.instance.%s is not available in a worker: it has "
                             "routes (recorded, not served), send_sync and send_progress_text "
                             "(not forwarded) and client_id" % name)
