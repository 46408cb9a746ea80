"""A worker's aiohttp routes on ComfyUI's own server (docs/comfyui.md, "A pack's aiohttp
routes"): each route a pack registered on `PromptServer.instance.routes` in its worker is
registered on ComfyUI's table at the same path, with a handler that forwards the request to the
worker's web socket (the host made it; the worker serves the pack's handlers there with aiohttp,
worker/_web_server.py) and streams the answer back.

The request goes as it came: method, path and query, headers (but those of this hop), cookies,
and its body streamed as it arrives. The answer comes back the same way: status, reason,
headers and body, a piece at a time, so a 1 GiB FileResponse is never held by either process,
and Range or conditional requests are the worker's aiohttp's to answer. A worker that is gone
(restarting, or failed) answers 502 naming the pack's env.

A request and ComfyUI's objects are aiohttp's and ComfyUI's, not type-checked here: Any."""

from __future__ import annotations

import atexit
import logging
from typing import Any

_log = logging.getLogger("comfy_orch")
_PIECE = 64 << 10
# A hop's own headers (RFC 9110 7.6.1), never forwarded; Host is kept, for request.url.
_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
        "transfer-encoding", "upgrade", "proxy-connection"}


def handler(web: Any, route: dict[str, Any]) -> Any:
    """The aiohttp handler of one worker route on ComfyUI's server."""
    import aiohttp
    socket_path = str(route.get("socket"))
    env = "%s (pack %s)" % (route.get("env"), route.get("pack")) if route.get("pack") else str(
        route.get("env"))

    async def proxy(request: Any) -> Any:
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
        body = request.content if request.body_exists else None
        answer = web.StreamResponse()
        # A request without a body is tried twice: a kept connection may be one the worker
        # closed as it restarted, before this loop saw it close.
        for attempt in range(1 if body is not None else 2):
            try:
                return await _forward(_session(aiohttp, socket_path), request, headers, body,
                                      answer)
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
                if answer.prepared:
                    raise  # its status is sent: the connection ends, the body cut short
                failure = exc
                if not isinstance(exc, aiohttp.ServerDisconnectedError):
                    break
        _log.warning("[comfy-orch] %s %s: the worker of env %s did not answer: %s",
                     request.method, request.path, env, failure)
        return web.json_response(
            {"error": "the worker of env %s, which serves %s, did not answer (%s); it "
                      "restarts after a loss: try again shortly" % (env, request.path, failure)},
            status=502)

    proxy.__qualname__ = "comfy_orch worker route %s %s (env %s)" % (
        route.get("method"), route.get("path"), env)
    return proxy


async def _forward(session: Any, request: Any, headers: list[tuple[str, str]], body: Any,
                   answer: Any) -> Any:
    """The request through `session`; the worker's answer streamed into `answer`."""
    async with session.request(request.method, "http://worker" + request.raw_path,
                               headers=headers, data=body, allow_redirects=False,
                               skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding")
                               ) as upstream:
        answer.set_status(upstream.status, upstream.reason)
        for k, v in upstream.raw_headers:
            name = k.decode("latin-1")
            if name.lower() not in _HOP and name.lower() != "content-length":
                answer.headers.add(name, v.decode("latin-1"))
        if upstream.content_length is not None:
            answer.content_length = upstream.content_length
        await answer.prepare(request)
        async for piece in upstream.content.iter_chunked(_PIECE):
            await answer.write(piece)
        await answer.write_eof()
        return answer


_sessions: dict[str, tuple[Any, Any]] = {}  # socket path -> (its loop, its client session)


def _session(aiohttp: Any, socket_path: str) -> Any:
    """The client session to a worker's socket on the running loop (ComfyUI has one; a new loop,
    as each asyncio.run makes, gets a new session)."""
    import asyncio
    loop = asyncio.get_running_loop()
    known = _sessions.get(socket_path)
    if known is None or known[0] is not loop or known[1].closed:
        if known is None and not _sessions:
            atexit.register(_close_all)
        elif known is not None:
            _close(known[1])  # its loop is gone: so are its connections
        session = aiohttp.ClientSession(
            connector=aiohttp.UnixConnector(path=socket_path), auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))
        _sessions[socket_path] = known = (loop, session)
    return known[1]


def _close(session: Any) -> None:
    """A session's connections closed without its loop (aiohttp's connector closes them at
    once), so that neither a new loop nor the process's exit finds it open."""
    connector = session.connector
    if connector is not None and not connector.closed:
        # _close() is what close() runs (a coroutine from aiohttp 3.9, and in 3.8 a waiter
        # that warns unless awaited): awaiting needs the loop, which is gone.
        getattr(connector, "_close", connector.close)()


def _close_all() -> None:
    for _, session in _sessions.values():
        _close(session)
    _sessions.clear()
