"""ComfyUI's utils.extra_config: main.py imports it right after enabling argument parsing,
before anything puts comfy/ on sys.path, which is what makes `utils` ComfyUI's package in its
process. It imports folder_paths (and so comfy.cli_args)."""

import folder_paths  # noqa: F401
