"""ComfyUI's app.frontend_management as far as importing it goes: it imports
utils.install_util, which fails where `utils` is comfy/utils.py (see nodes.py)."""

from utils.install_util import requirements_path  # noqa: F401
