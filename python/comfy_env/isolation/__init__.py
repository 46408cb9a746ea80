"""comfy_env.isolation: register_nodes()."""

from comfy_orch.comfyui import register_nodes

__all__ = ["register_nodes"]
