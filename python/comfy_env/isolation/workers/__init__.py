"""comfy_env.isolation.workers: register_serializer lives in its _ipc_shared module."""
