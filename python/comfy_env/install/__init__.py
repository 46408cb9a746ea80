"""comfy_env.install: install(), as packs' install.py import it."""

from comfy_env._api import install

__all__ = ["install"]
