"""comfy_env.environment.setup: setup_env(), as prestartup scripts import it."""

from comfy_env._api import setup_env

__all__ = ["setup_env"]
