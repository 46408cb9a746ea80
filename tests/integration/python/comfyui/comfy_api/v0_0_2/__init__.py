"""comfy_api.v0_0_2: a pinned API version; its io is latest's (as in ComfyUI at a125cd8)."""

from comfy_api.latest import io, ComfyExtension  # noqa: F401
