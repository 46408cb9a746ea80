"""comfy_env.install: install(), as packs' install.py import it."""

from comfy_orch.comfyui._comfy_env_api import install

__all__ = ["install"]
