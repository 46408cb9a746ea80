"""comfy_env.environment.cache: copy_files(), as prestartup scripts import it."""

from comfy_env._api import copy_files

__all__ = ["copy_files"]
