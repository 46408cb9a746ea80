"""The pack's own HTTP route, registered on PromptServer.instance.routes at import as viewer
packs register theirs: its JavaScript (web/browser_demo.js) shows the colour a running node
reports as a swatch fetched from here. It runs in the pack's worker, served by its aiohttp."""

import re

import numpy as np
from aiohttp import web
from server import PromptServer

from .png import png

SWATCH = 24  # pixels a side: small, and big enough for the page to read one back


@PromptServer.instance.routes.get("/browserdemo/swatch")
async def swatch(request):
    """A SWATCH-square PNG of `colour`, six hex digits (rrggbb)."""
    colour = request.query.get("colour", "")
    if not re.fullmatch(r"[0-9a-fA-F]{6}", colour):
        return web.Response(status=400, text="colour must be six hex digits (rrggbb)")
    rgb = np.array([int(colour[i:i + 2], 16) for i in (0, 2, 4)], dtype=np.uint8)
    pixels = np.ascontiguousarray(np.broadcast_to(rgb, (SWATCH, SWATCH, 3)))
    return web.Response(body=png(pixels), content_type="image/png",
                        headers={"Cache-Control": "no-cache"})
