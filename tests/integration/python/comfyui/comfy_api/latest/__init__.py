"""comfy_api.latest: the V3 node API's entry points."""

from . import _io as io  # noqa: F401


class ComfyExtension:
    async def on_load(self):
        pass

    async def get_node_list(self):
        return []
