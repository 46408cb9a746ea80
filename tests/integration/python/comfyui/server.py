"""ComfyUI's server module as packs import it (ComfyUI a125cd84): importing it imports nodes and
comfy.model_management, so a worker that imports it without ComfyUI's --cpu dies on a machine
without CUDA. PromptServer.instance is ComfyUI's one server (None outside ComfyUI's process)."""

import comfy.model_management  # noqa: F401  (what makes a worker need --cpu)


class PromptServer:
    instance = None
