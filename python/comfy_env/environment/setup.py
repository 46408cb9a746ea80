"""comfy_env.environment.setup: setup_env(), as prestartup scripts import it."""

from comfy_orch.comfyui._comfy_env_api import setup_env

__all__ = ["setup_env"]
