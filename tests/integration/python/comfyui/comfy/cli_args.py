"""comfy.cli_args as comfy-orch reads it: `args`, ComfyUI's parsed command line, here with the
defaults of the memory flags the host mirrors (docs/comfyui.md)."""

import argparse

args = argparse.Namespace(
    cpu=False, highvram=False, gpu_only=False, novram=False, lowvram=False,
    reserve_vram=None, vram_headroom=None, disable_pinned_memory=False, async_offload=None,
    disable_async_offload=False, disable_dynamic_vram=False, enable_dynamic_vram=False,
    disable_smart_memory=False)
