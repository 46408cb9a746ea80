"""Which tensors node code gets (docs/python.md): torch tensors when its pack imported torch,
numpy arrays otherwise; COMFY_ORCH_TENSORS=torch|numpy overrides. Apart from tensors.py, which
imports numpy, so that deciding it does not: a pack that uses no tensors never imports numpy,
and runs in an env that has none."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from types import ModuleType


def use_torch() -> bool:
    choice = os.environ.get("COMFY_ORCH_TENSORS", "")
    if choice == "torch":
        return True
    if choice == "numpy":
        return False
    return "torch" in sys.modules


def is_tensor(obj: object) -> bool:
    """Whether `obj` is a numpy array or a torch tensor, without importing either: an object can
    only be one once its library is imported."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(obj, numpy.ndarray):
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def load_tensors() -> ModuleType:
    """The tensors module, importing numpy at a worker's first tensor. An env without numpy is
    told what to do: tensors cross between processes as numpy arrays (torch's too, as views)."""
    try:
        from . import tensors
    except ModuleNotFoundError as exc:
        if exc.name != "numpy":
            raise
        raise ModuleNotFoundError(
            "a tensor crossed into an env without numpy (%s): tensors cross between processes as "
            "numpy arrays; add numpy to the pack's dependencies (comfy-env.toml)"
            % sys.executable, name="numpy") from exc
    return tensors
