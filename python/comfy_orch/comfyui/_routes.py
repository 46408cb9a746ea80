"""A worker's HTTP routes on ComfyUI's own server (docs/comfyui.md, "A pack's HTTP routes"), as
comfy-env 0.4.46 serves a pack's `ROUTES`: each route the host lists for an env becomes an
aiohttp handler on `server.PromptServer.instance.routes`, registered while the pack loads (main.py
adds that table to its app after every pack has loaded). The handler sends the request's JSON
body to the worker, where the pack's function runs, and answers its JSON; `"_status"` in the
answer is the HTTP status.

Unlike comfy-env, a request without a body (a GET) sends its query parameters as the body, and a
failed call (or a `_status` that is not an HTTP status) answers 502 with the worker's error: the
route exists, what is behind it failed.

A route's path is ComfyUI's namespace, and the table is matched in order before the routes
ComfyUI adds after the packs load (its web root, every pack's /extensions/, its user routes): a
path is served only under a literal first segment of its own, with variables of one segment each
(path_refusal). A body is read up to MAX_BODY_BYTES, and one that is not JSON answers 400.

A request and ComfyUI's objects are aiohttp's and ComfyUI's, not type-checked here: Any."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from typing import Any

from ..host import Host, NodeError
from . import _web_proxy

_log = logging.getLogger("comfy_orch")

# The most a route's body may be: a call's frame is at most 1 MiB (ipc/include/orch/ipc/frame.hpp,
# default_max_body), so a larger body could never reach the worker. Read in pieces and refused
# once past it: ComfyUI's own cap (client_max_size, --max-upload-size) is 100 MiB, and a 99 MiB
# body read whole had held 1.57 GB before the call refused it.
MAX_BODY_BYTES = 1 << 20
_PIECE = 64 << 10

# aiohttp's grammar of a path (web_urldispatcher.py, DynamicResource: ROUTE_RE, DYN, DYN_WITH_RE):
# a variable is {name} (its default regex [^{}/]+, one segment) or {name:regex}.
_VARIABLE = re.compile(r"(\{[_a-zA-Z][^{}]*(?:\{[^{}]*\}[^{}]*)*\})")
_NAMED = re.compile(r"\{[_a-zA-Z][_a-zA-Z0-9]*(?::(?P<regex>.+))?\}")
_COUNT = re.compile(r"\{(\d*)(,?)(\d*)\}")
_ESCAPES = ("d", "w", "s", "D", "W", "S")  # besides an escaped punctuation character
_RESERVED = {"extensions": "ComfyUI serves every pack's web files there"}
_CORE = ("api", "ws", "internal")  # ComfyUI's own prefixes: no variable may answer under them
_HINT = ("; give the route a literal prefix of its own such as /<pack>/..., with variables of one "
         "segment each (docs/comfyui.md, \"A pack's HTTP routes\")")


def path_refusal(path: str, tail_catch_all: bool = False) -> str | None:
    """Why a pack's route path is not served on ComfyUI's server, or None. The rule:

    - its first segment is literal, not empty and not a prefix ComfyUI serves after the packs
      load: a variable there (/{x}, /{x}/{y}, /a{x}) answers ComfyUI's later routes;
    - no variable can match '/' (a catch-all such as {x:.*} answers every path under it);
    - a custom regex is a sequence of single characters, escapes (\\d \\w \\s, escaped
      punctuation) and classes, each with at most one quantifier: no groups, alternation,
      backreferences, lookarounds or anchors, which are what backtracks ({x:(a+)+b} had cost 9 s
      of CPU per 36-byte request);
    - a segment holds at most one part of variable length ({name}, or an item quantified with
      ?, *, + or {m,n}): two in one segment ({w}x{h}) backtrack in the square of its length;
    - with `tail_catch_all` (an aiohttp route, whose pack serves files under its prefix), the
      path's last part may be a variable that matches '/' ({path:.*}): it answers only under
      the route's own literal prefix, and nothing follows it to backtrack over;
    - a variable is never under /api/, /ws or /internal/, where it would answer ComfyUI's own
      routes."""
    variable = [0]  # per segment, its parts of variable length; [0] is before the first '/'
    for i, part in enumerate(_VARIABLE.split(path)):
        if i % 2 == 0:  # literal text between variables: each '/' starts a segment
            if "{" in part or "}" in part:
                return "its path has a brace outside a {name} or {name:regex} variable"
            variable += [0] * part.count("/")
            continue
        if len(variable) <= 2:
            return "its first segment is not literal: %s there answers ComfyUI's routes" % part
        if path.split("/")[1] in _CORE:
            return "%s under /%s/ answers ComfyUI's own routes" % (part, path.split("/")[1])
        named = _NAMED.fullmatch(part)
        if named is None:
            return "%s is not a {name} or {name:regex} variable" % part
        last = i == len(_VARIABLE.split(path)) - 2 and not _VARIABLE.split(path)[-1]
        why, parts = (None, 1) if named["regex"] is None else _regex_refusal(
            named["regex"], tail_catch_all and last)
        if why is not None:
            return "%s: %s" % (part, why)
        variable[-1] += parts
        if variable[-1] > 1:
            return ("a segment holds more than one part of variable length (at %s): it "
                    "backtracks; put each in a segment of its own" % part)
    first = path.split("/")[1] if path.startswith("/") else ""
    if not first:
        return "it has no first segment"
    if first in _RESERVED:
        return "its first segment is /%s/: %s" % (first, _RESERVED[first])
    return None


def _regex_refusal(regex: str, may_match_slash: bool = False) -> tuple[str | None, int]:
    """Why a variable's regex is refused (path_refusal's grammar), else None and how many of its
    items are of variable length."""
    parts, i = 0, 0
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            if not _plain_escape(regex[i + 1:i + 2]):
                return ("\\%s (a backreference, anchor or other escape) is not allowed"
                        % regex[i + 1:i + 2]), 0
            item, i = regex[i:i + 2], i + 2
        elif c == "[":
            end = _class_end(regex, i)
            if isinstance(end, str):
                return end, 0
            item, i = regex[i:end], end
        elif c in "()|":
            return "groups and alternation are not allowed", 0
        elif c in "^$":
            return "%s (an anchor) is not allowed" % c, 0
        elif c in "*+?{}":
            return "a quantifier follows no character or class", 0
        else:
            item, i = c, i + 1
        try:
            if re.fullmatch(item, "/") and not may_match_slash:
                return "%s can match '/'" % item, 0
        except re.error as exc:
            return "%s is not a regular expression: %s" % (item, exc), 0
        if regex[i:i + 1] in ("*", "+", "?"):
            parts, i = parts + 1, i + 1
        elif regex[i:i + 1] == "{":
            count = _COUNT.match(regex, i)
            if count is None or not (count[1] or count[3]):
                return "%s is no count" % regex[i:regex.find("}", i) + 1], 0
            parts += 1 if count[2] == "," and count[1] != count[3] else 0  # {m}, {m,m}: fixed
            i = count.end()
        else:
            continue
        if regex[i:i + 1] in ("*", "+", "?", "{"):  # lazy, possessive or repeated
            return "a quantifier follows a quantifier", 0
    return None, parts


def _class_end(regex: str, start: int) -> int | str:
    """The index after the class [...] at `start`, or why it is refused."""
    i = start + 1
    i += regex[i:i + 1] == "^"
    i += regex[i:i + 1] == "]"  # a ']' first is a character of the class
    while i < len(regex) and regex[i] != "]":
        if regex[i] == "[":  # a nested set to come, or a POSIX class: not Python's
            return "'[' inside a class is not allowed"
        if regex[i] == "\\":
            if not _plain_escape(regex[i + 1:i + 2]):
                return "\\%s in a class is not allowed" % regex[i + 1:i + 2]
            i += 1
        i += 1
    if i >= len(regex):
        return "an unclosed character class"
    if re.search(r"--|&&|~~|\|\|", regex[start:i]):  # set operations Python reserves
        return "a class with --, &&, ~~ or || is not allowed"
    return i + 1


def _plain_escape(escaped: str) -> bool:
    """\\d \\w \\s and their negations, or escaped punctuation: never a backreference (\\1),
    an anchor (\\b, \\A) or a code (\\x, \\u, \\N)."""
    return escaped in _ESCAPES or (len(escaped) == 1 and not escaped.isalnum())


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
    # ComfyUI's rule for a method and path registered twice: the first registration answers
    # (aiohttp matches in order; the same resource twice would stop main.py's add_routes).
    taken = {(getattr(r, "method", ""), getattr(r, "path", "")): getattr(r, "handler", None)
             for r in table}
    for route in routes:
        method, path = str(route.get("method")), str(route.get("path"))
        proxied = route.get("aiohttp") is True and route.get("socket")
        proxy = (_web_proxy.handler(web, route) if proxied else _handler(host, web, route))
        why = None
        refusal = path_refusal(path, tail_catch_all=bool(proxied))
        if method != "*" and not callable(getattr(table, method.lower(), None)):
            why = "ComfyUI's route table has no %s" % method.lower()
        elif refusal is not None:
            why = refusal + _HINT
        elif (method, path) in taken:
            first = taken[(method, path)]
            why = "%s already answers it (ComfyUI's rule: the first registration wins)" % (
                getattr(first, "__qualname__", None) or "ComfyUI's server")
        else:
            try:
                web.UrlDispatcher().add_route(method, path, proxy)
            except (ValueError, RuntimeError) as exc:
                why = "aiohttp refuses the path: %s" % exc
        if why is not None:
            _log.warning("[comfy-orch] route %s %s of env %s is not served: %s", method, path,
                         route.get("env"), why)
            continue
        taken[(method, path)] = proxy
        table.route(method, path)(proxy)
        _log.info("[comfy-orch] route %s %s -> %s.%s in env %s", method, path,
                  route.get("module"), route.get("handler"), route.get("env"))


def _handler(host: Host, web: Any, route: dict[str, Any]) -> Any:
    class_type = str(route.get("class_type"))

    async def proxy(request: Any) -> Any:
        if request.body_exists:
            body = await _json_body(request)
            if isinstance(body, tuple):
                status, error = body
                return web.json_response({"error": error}, status=status)
        else:
            body = json.dumps(dict(request.query))
        loop = asyncio.get_running_loop()
        try:
            outputs = await loop.run_in_executor(None, host.call, class_type, {"body": body},
                                                 "route")
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


async def _json_body(request: Any) -> str | tuple[int, str]:
    """The request's body as JSON text for the worker, or the status and error that answer it:
    413 past MAX_BODY_BYTES (refused before reading when Content-Length says so, else once the
    pieces read pass it: never read whole), 400 for a body that is not JSON. request.json()
    would read it whole, and answer 500 for a body nested deeper than Python recurses."""
    too_large = 413, "the body is over %d bytes, the most a route's call carries" % MAX_BODY_BYTES
    if (request.content_length or 0) > MAX_BODY_BYTES:
        return too_large
    data = bytearray()
    while piece := await request.content.read(_PIECE):
        data += piece
        if len(data) > MAX_BODY_BYTES:
            return too_large
    charset = request.charset or "utf-8"
    try:
        # Parsed here to answer 400 rather than the worker's 502, and written again so the
        # worker gets the text json.dumps writes (the same as before: comfy-env's body).
        return json.dumps(json.loads(data.decode(charset)))
    except LookupError:
        return 400, "Invalid JSON: the body's charset %r is unknown" % charset
    except UnicodeDecodeError:
        return 400, "Invalid JSON: the body is not %s text" % charset
    except RecursionError:
        return 400, "Invalid JSON: nested too deeply"
    except ValueError:
        return 400, "Invalid JSON"
