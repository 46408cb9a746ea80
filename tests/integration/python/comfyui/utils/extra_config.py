"""ComfyUI's utils.extra_config: main.py imports it first, before anything puts comfy/ on
sys.path, which is what makes `utils` ComfyUI's package in its process."""
