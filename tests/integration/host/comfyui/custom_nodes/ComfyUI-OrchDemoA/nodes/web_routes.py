"""aiohttp routes registered the way viewer packs register them, on PromptServer.instance.routes
at import: a file with Range, an upload read as multipart, match_info, query, cookies and
headers, a streamed answer, a slow handler, one that kills its worker, and one that sends
messages to ComfyUI's clients. They run in the worker, served by its own aiohttp."""

import asyncio
import hashlib
import os

from aiohttp import web
from server import PromptServer

routes = PromptServer.instance.routes
FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "orchdemo-web.bin")
_released = asyncio.Event()


def _file():
    if not os.path.exists(FILE):
        with open(FILE, "wb") as f:
            f.write(bytes(range(256)) * 4096 * 3)  # 3 MiB
    return FILE


@routes.get("/orchdemo/web/file")
async def file(request):
    return web.FileResponse(_file(), headers={"Cache-Control": "no-cache"})


@routes.get("/orchdemo/web/item/{name}/{rest:.*}")
async def item(request):
    return web.json_response({
        "pid": os.getpid(), "method": request.method, "path": request.path,
        "match_info": dict(request.match_info), "query": dict(request.query),
        "cookie": request.cookies.get("flavour"), "header": request.headers.get("X-Demo"),
        "host": request.host})


@routes.post("/orchdemo/web/upload")
async def upload(request):
    form = await request.post()
    image = form["image"]
    data = image.file.read()
    return web.json_response({"fields": sorted(form.keys()), "name": image.filename,
                              "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                              "note": form.get("note")}, status=201)


@routes.put("/orchdemo/web/raw")
async def raw(request):
    digest, size = hashlib.sha256(), 0
    async for piece in request.content.iter_chunked(1 << 16):
        digest.update(piece)
        size += len(piece)
    return web.json_response({"size": size, "sha256": digest.hexdigest()})


@routes.get("/orchdemo/web/stream")
async def stream(request):
    answer = web.StreamResponse(headers={"X-Stream": "yes"})
    answer.content_type = "text/plain"
    await answer.prepare(request)
    for i in range(5):
        await answer.write(b"piece %d\n" % i)
    await answer.write_eof()
    return answer


@routes.get("/orchdemo/web/slow")
async def slow(request):
    await asyncio.wait_for(_released.wait(), 60)
    _released.clear()
    return web.json_response({"released": True})


@routes.post("/orchdemo/web/release")
async def release(request):
    _released.set()
    return web.json_response({"ok": True})


@routes.post("/orchdemo/web/die")
async def die(request):
    os._exit(3)


@routes.post("/orchdemo/web/say")
async def say(request):
    body = await request.json()
    server = PromptServer.instance
    server.send_sync("orchdemo.said", {"text": body["text"]}, body.get("sid"))
    await server.send("orchdemo.async", {"n": 1})
    server.send_sync(5, b"\x00\x01raw", body.get("sid"))
    server.send_progress_text("working on it", "42", body.get("sid"))
    return web.json_response({"ok": True})


# ROUTES (routes.py) has GET /orchdemo/where: the first registration keeps it.
@routes.get("/orchdemo/where")
async def where_again(request):
    return web.json_response({"second": True})


# ComfyUI's own /view: registered first, it answers (the host's log names both).
@routes.get("/view")
async def not_core_view(request):
    return web.json_response({"pack": True})
