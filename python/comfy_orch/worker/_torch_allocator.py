"""torch's CUDA allocator through the worker's allocator plugin (docs/python.md): where torch has
CUDA, CUDAPluggableAllocator over the plugin's orch_torch_malloc and orch_torch_free, so the
tensors a pack allocates count against the one pinned budget and reclaim through the pager, as
the host's own do. It must be installed before the pack allocates anything on the device, so it
runs right after the pack's import and only when torch was imported."""

from __future__ import annotations

import os
import sys


def install() -> bool | str:
    """True when installed; otherwise the reason it was not (a string), for the worker's log."""
    torch = sys.modules.get("torch")
    if torch is None:
        return "the pack does not use torch"
    plugin = os.environ.get("ORCH_ALLOCATOR_PLUGIN", "")
    if not plugin:
        return "no allocator plugin was injected"
    if not torch.cuda.is_available():
        return "torch has no CUDA device here"
    memory = torch.cuda.memory
    allocator = memory.CUDAPluggableAllocator(plugin, "orch_torch_malloc", "orch_torch_free")
    memory.change_current_allocator(allocator)
    return True
