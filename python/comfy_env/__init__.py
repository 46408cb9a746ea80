"""comfy-env's public surface (0.4.46: install, setup_env, register_nodes, copy_files,
register_serializer), answered by comfy-orch (docs/comfyui.md, "The comfy_env drop-in"):
`comfy-orch launch` puts this package ahead of any installed comfy-env, so a pack written for
comfy-env,

    from comfy_env import register_nodes
    NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS = register_nodes()

runs unchanged, its isolated envs in comfy-orch workers, and its install.py and
prestartup_script.py work too. Each name is also importable from the module comfy-env defines it
in (comfy_env.isolation.workers._ipc_shared.register_serializer, ...).

The drop-in's audience is such a pack: its whole surface is implemented in _api.py; the other
modules are the paths comfy-env defines each name at."""

from typing import NoReturn

from comfy_env._api import copy_files, install, register_serializer, setup_env, signpost
from comfy_orch.comfyui import register_nodes

__all__ = ["install", "setup_env", "register_nodes", "copy_files", "register_serializer"]


def __getattr__(name: str) -> NoReturn:
    raise signpost(name)
