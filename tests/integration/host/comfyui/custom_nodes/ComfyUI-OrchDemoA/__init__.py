# A pack written for comfy-env, unchanged: under `comfy-orch launch` (or with comfy_orch's python/
# first on sys.path) comfy_env is comfy-orch's compatibility module.
from comfy_env import register_nodes

NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS = register_nodes()
