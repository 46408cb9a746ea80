"""ComfyUI-DepthAnythingV3's prestartup shape: comfy-env's setup_env() and copy_files(), called
unguarded (an exception here is ComfyUI's "Failed to execute startup-script")."""

from pathlib import Path

from comfy_env import copy_files, setup_env

setup_env()
copy_files(Path(__file__).resolve().parent / "assets", "input/orchdemo", "**/*")
