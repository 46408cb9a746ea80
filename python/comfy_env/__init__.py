"""comfy-env's public surface, answered by comfy-orch (docs/comfyui.md): `comfy-orch launch` puts
this module ahead of any installed comfy-env, so a pack written for comfy-env,

    from comfy_env import register_nodes
    NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS = register_nodes()

runs unchanged, its isolated envs in comfy-orch workers. The rest of comfy-env's surface either
works or names what replaces it."""

from comfy_orch.comfyui import register_nodes

__all__ = ["register_nodes", "install", "setup_env", "register_serializer", "input_files"]


class ReplacedByComfyOrch(RuntimeError):
    """A comfy-env function whose job comfy-orch does elsewhere: the message names where."""


def install(*args, **kwargs):
    raise ReplacedByComfyOrch(
        "comfy_env.install() is not available under comfy-orch: build the pack's envs with "
        "`comfy-orch envs <deployment>` to see what is missing, and comfy-env's own CLI or "
        "`comfy-orch install` (when available) to build them")


def setup_env(*args, **kwargs):
    raise ReplacedByComfyOrch(
        "comfy_env.setup_env() is not available under comfy-orch: comfy-orch sets up each "
        "worker's environment itself (docs/python.md, \"The worker's process environment\")")


def register_serializer(*args, **kwargs):
    raise ReplacedByComfyOrch(
        "comfy_env.register_serializer() has no use under comfy-orch: objects that are not "
        "tensors stay in their worker as handles and are never serialized (docs/python.md)")


def input_files(*args, **kwargs):
    raise ReplacedByComfyOrch(
        "comfy_env.input_files() is not provided by comfy-orch yet: read ComfyUI's input "
        "directory with folder_paths in the node itself")
