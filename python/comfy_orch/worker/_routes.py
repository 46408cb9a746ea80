"""A pack's HTTP routes, declared as comfy-env 0.4.46 reads them (docs/comfyui.md, "A pack's HTTP
routes"): a `ROUTES` list in the pack's node module or in any of its submodules imported by
then,

    ROUTES = [{"method": "POST", "path": "/my/endpoint", "handler": "my_handler"}]

    def my_handler(body):           # runs in the worker, with the request's JSON body
        return {"result": "ok"}     # {"_status": 400, "error": "..."} for another status

each entry's handler being a function of the module that lists it (or of the one its "module"
names). Each route becomes one class of the worker's node set that no prompt can name (the host
keeps it apart, node_catalogue.hpp): its one input is the request's body as JSON text, its one
output the handler's answer as JSON text. ComfyUI's side serves it on ComfyUI's own server
(comfy_orch.comfyui._routes)."""

from __future__ import annotations

import json
import logging
import sys

from . import _schema

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any

_log = logging.getLogger("comfy_orch")
CLASS_PREFIX = "orch.route:"
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def declared(module: ModuleType) -> list[dict[str, Any]]:
    """Every ROUTES entry of the pack's module and its submodules, with "module" set to the
    module that lists it where the entry does not name one (comfy-env's rule)."""
    name = module.__name__
    found: list[dict[str, Any]] = []
    sources = [(name, module)] + [(n, m) for n, m in sorted(sys.modules.items())
                                  if n.startswith(name + ".") and m is not None]
    for source_name, source in sources:
        listed = getattr(source, "ROUTES", None)
        if not isinstance(listed, (list, tuple)):
            continue
        for entry in listed:
            if isinstance(entry, dict):
                found.append(dict(entry, module=entry.get("module", source_name)))
            else:
                _log.warning("[comfy-orch] %s.ROUTES: %r is not a dict with method, path and "
                             "handler; skipped", source_name, entry)
    return found


def route_specs(module: ModuleType) -> list[RouteSpec]:
    """A RouteSpec for each well-formed route; each one refused is said in the log with why."""
    specs: list[RouteSpec] = []
    taken: set[str] = set()
    for entry in declared(module):
        method = str(entry.get("method", "POST")).upper()
        path, handler, where = entry.get("path"), entry.get("handler"), entry.get("module")
        said = "%s.ROUTES entry %s %s" % (where, method, path)
        target = sys.modules.get(where) if isinstance(where, str) else None
        function = getattr(target, handler, None) if isinstance(handler, str) else None
        if method not in _METHODS:
            why = "its method is none of " + ", ".join(_METHODS)
        elif not isinstance(path, str) or not path.startswith("/") or any(
                c.isspace() or not c.isprintable() for c in path):
            why = "its path is not a URL path starting with '/'"
        elif not callable(function):
            why = "its handler %r is not a function of %s" % (handler, where)
        elif method + " " + path in taken:
            why = "an earlier entry declares the same method and path"
        else:
            taken.add(method + " " + path)
            assert isinstance(where, str) and isinstance(handler, str)  # checked above
            specs.append(RouteSpec(method, path, where, handler, function))
            continue
        _log.warning("[comfy-orch] %s is not served: %s", said, why)
    return specs


class RouteSpec(_schema.NodeSpec):
    """One route as a node class: input "body", output the answer, both JSON text."""

    def __init__(self, method: str, path: str, module: str, handler: str,
                 function: Callable[..., Any]) -> None:
        self.route: dict[str, Any] = {"method": method, "path": path, "module": module,
                                      "handler": handler}
        super().__init__(CLASS_PREFIX + method + " " + path, _route_class(function), None)

    def schema_json(self) -> str:
        schema = self.schema()
        schema["orch_route"] = self.route
        return json.dumps(schema)


def _route_class(function: Callable[..., Any]) -> type:
    """A V1 node class whose one function calls the handler with the parsed body."""

    def handle(self: object, body: str) -> tuple[str]:
        answer = function(json.loads(body) if body else {})
        if hasattr(answer, "__await__"):  # an async handler: the worker has no loop of its own
            import asyncio
            answer = asyncio.run(_awaited(answer))
        return (json.dumps(answer, allow_nan=False),)

    return type("Route", (), {
        "INPUT_TYPES": classmethod(lambda cls: {"required": {"body": ("STRING",)}}),
        "RETURN_TYPES": ("STRING",), "FUNCTION": "handle", "NOT_IDEMPOTENT": True,
        "CATEGORY": "", "handle": handle})


async def _awaited(answer: Any) -> Any:
    return await answer
