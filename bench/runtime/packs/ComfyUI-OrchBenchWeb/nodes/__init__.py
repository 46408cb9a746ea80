"""bench_web_routes' pack: aiohttp routes registered as viewer packs register them (on
PromptServer.instance.routes at import), served from this worker, and an empty node.

- GET /orchbench/file: web.FileResponse of orchbench-file.bin beside this file (bench_web_routes
  writes it, 64 MiB; ComfyUI's process serves the same file from a route of its own);
- GET /orchbench/json: a small web.json_response;
- BenchWebEmpty: the empty node whose Host.call is the JSON route's floor."""

import os

from aiohttp import web
from server import PromptServer

FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "orchbench-file.bin")
ANSWER = {"ok": True, "pack": "ComfyUI-OrchBenchWeb", "n": 1}

routes = PromptServer.instance.routes


@routes.get("/orchbench/file")
async def file(request):
    return web.FileResponse(FILE)


@routes.get("/orchbench/json")
async def small_json(request):
    return web.json_response(ANSWER)


class BenchWebEmpty:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ()
    FUNCTION = "run"
    CATEGORY = "bench"
    OUTPUT_NODE = True

    def run(self):
        return ()


NODE_CLASS_MAPPINGS = {"BenchWebEmpty": BenchWebEmpty}
NODE_DISPLAY_NAME_MAPPINGS = {}
