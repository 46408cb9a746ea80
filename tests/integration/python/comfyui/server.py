"""ComfyUI's server module as packs import it (ComfyUI a125cd84): importing it imports nodes
(which puts comfy/ first on sys.path) and comfy.model_management, then
app.frontend_management, which imports utils.install_util. So a worker that imports it dies
without ComfyUI's --cpu on a machine without CUDA, and dies unless ComfyUI's utils package was
imported first, as main.py does. PromptServer.instance is ComfyUI's one server, set by its
constructor: where none was built (a worker), the class has no `instance` attribute at all."""

import nodes  # noqa: F401
import comfy.model_management  # noqa: F401  (what makes a worker need --cpu)
from app.frontend_management import requirements_path  # noqa: F401
import struct
import threading

from aiohttp import web


class PromptServer:
    """The members packs and comfy-orch use, as ComfyUI 0.8 has them. ComfyUI's send_sync puts
    (event, data, sid) on its loop's queue, from any thread, for its clients; here the queue is
    a list nobody drains (the tests record the calls, as they do on a real tree)."""

    def __init__(self, loop=None):
        PromptServer.instance = self
        self.routes = web.RouteTableDef()  # main.py adds it to the app after packs load

        # ComfyUI registers its core routes on the same table first, so a pack's route at one
        # of their paths comes second and never answers. One stands for them all here (its
        # answer is not ComfyUI's /view: only its place in the table is).
        @self.routes.get("/view")
        async def view_image(request):
            return web.json_response({"core": True}, status=404)
        self.client_id = None  # set when a prompt starts, from its extra_data; never reset
        self.last_node_id = None
        self.messages = []
        self._lock = threading.Lock()

    def send_sync(self, event, data, sid=None):
        with self._lock:
            self.messages.append((event, data, sid))

    async def send(self, event, data, sid=None):
        self.send_sync(event, data, sid)

    def send_progress_text(self, text, node_id, sid=None):
        if isinstance(text, str):
            text = text.encode("utf-8")
        node = str(node_id).encode("utf-8")
        self.send_sync(3, struct.pack(">I", len(node)) + node + text, sid)  # BinaryEventTypes.TEXT
