"""ComfyUI's server module as packs import it (ComfyUI a125cd84): importing it imports nodes
(which puts comfy/ first on sys.path) and comfy.model_management, then
app.frontend_management, which imports utils.install_util. So a worker that imports it dies
without ComfyUI's --cpu on a machine without CUDA, and dies unless ComfyUI's utils package was
imported first, as main.py does. PromptServer.instance is ComfyUI's one server, set by its
constructor: where none was built (a worker), the class has no `instance` attribute at all."""

import nodes  # noqa: F401
import comfy.model_management  # noqa: F401  (what makes a worker need --cpu)
from app.frontend_management import requirements_path  # noqa: F401
from aiohttp import web


class PromptServer:
    def __init__(self, loop=None):
        PromptServer.instance = self
        self.routes = web.RouteTableDef()  # main.py adds it to the app after packs load
