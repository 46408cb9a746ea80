"""The browser test's Python pack, written for comfy-env: its nodes run in their own env."""

from comfy_env import register_nodes

NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS = register_nodes()
WEB_DIRECTORY = "./web"
