"""comfy_env.isolation.workers._ipc_shared: register_serializer(), the path packs (and their
worker code) import it from."""

from comfy_env._api import register_serializer

__all__ = ["register_serializer"]
