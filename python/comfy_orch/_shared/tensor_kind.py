"""Which tensors node code gets (docs/python.md): torch tensors when its pack imported torch,
numpy arrays otherwise; COMFY_ORCH_TENSORS=torch|numpy overrides. Apart from tensors.py, which
imports numpy, so that deciding it does not: a pack that uses no tensors never imports numpy."""

from __future__ import annotations

import os
import sys


def use_torch() -> bool:
    choice = os.environ.get("COMFY_ORCH_TENSORS", "")
    if choice == "torch":
        return True
    if choice == "numpy":
        return False
    return "torch" in sys.modules


def may_be_tensor() -> bool:
    """Whether any object could be a tensor: only once numpy or torch is imported."""
    return "numpy" in sys.modules or "torch" in sys.modules
