# bench_web_routes' pack (docs/performance.md, "A pack's web side"), written for comfy-env as
# a viewer pack is: its nodes/ is one isolated env, run by a comfy-orch worker.
from comfy_env import register_nodes

NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS = register_nodes()
