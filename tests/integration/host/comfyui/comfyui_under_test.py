"""Which ComfyUI the host tests run in: the fixture tree (tests/integration/python/comfyui), or a
real ComfyUI checkout named by ORCH_COMFYUI_ROOT (docs/comfyui.md, "Tests"), already first on
sys.path (test_comfyui_host.cpp puts it there).

ComfyUI (the fixture as the real one) parses its command line when comfy.cli_args is first
imported, and only when main.py enabled that (comfy.options); without a GPU, ComfyUI needs
--cpu. prepare() does both, as main.py would, and imports what ComfyUI has imported before it
loads packs: its utils package first of all (server.py needs it to be ComfyUI's, not comfy/'s).
"""

import os
import sys

REAL_ROOT = os.environ.get("ORCH_COMFYUI_ROOT") or None


def prepare():
    _parse_arguments()
    import utils.extra_config  # noqa: F401  (as main.py next: ComfyUI's utils package)
    # What ComfyUI has imported before it loads any pack (nodes.py imports comfy.sd, which
    # imports the patcher).
    import comfy.model_management  # noqa: F401
    import comfy.model_patcher  # noqa: F401
    import comfy.utils  # noqa: F401
    # main.py builds its server before it loads any pack: packs read PromptServer.instance.
    import asyncio
    import server
    if getattr(server.PromptServer, "instance", None) is None:
        server.PromptServer(asyncio.new_event_loop())


def _parse_arguments():
    import torch
    import comfy.options
    comfy.options.enable_args_parsing()
    saved = sys.argv
    sys.argv = [saved[0]] + ([] if torch.cuda.is_available() else ["--cpu"])
    try:
        import comfy.cli_args  # noqa: F401  (parses the arguments above, once)
    finally:
        sys.argv = saved
