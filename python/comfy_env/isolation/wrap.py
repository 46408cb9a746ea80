"""comfy_env.isolation.wrap: where comfy-env defines register_nodes()."""

from comfy_orch.comfyui import register_nodes

__all__ = ["register_nodes"]
