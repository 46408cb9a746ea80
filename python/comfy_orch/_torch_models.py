"""torch modules moved to the worker's device become models the host can see (docs/python.md),
as comfy-env registers them (docs/references.md, comfy-env §1.9 item 8): torch.nn.Module.to and
.cuda are wrapped, and a module whose parameters land on the worker's device during a node call
is registered once as "<ClassName>_<n>" with the bytes of its parameters and buffers. On the sim
device torch computes on the CPU, so there a move to comfy_orch.device() (the CPU) counts.

Installed only when the pack imported torch."""

import sys
import weakref

from . import _call

_registered = weakref.WeakSet()
_count = 0


def worker_device_kind():
    import os
    return os.environ.get("ORCH_DEVICE", "cpu").split(":")[0]


def device():
    """The torch device node code should put its tensors on: this worker's GPU, or the CPU for
    the cpu and sim devices."""
    import os

    import torch
    spec = os.environ.get("ORCH_DEVICE", "cpu")
    kind, _, index = spec.partition(":")
    if kind in ("cuda", "hip"):  # ROCm builds of torch name HIP devices "cuda" too
        return torch.device("cuda", int(index or 0))
    return torch.device("cpu")


def install():
    torch = sys.modules.get("torch")
    if torch is None or getattr(torch.nn.Module.to, "_comfy_orch", False):
        return
    original_to = torch.nn.Module.to
    original_cuda = torch.nn.Module.cuda

    def to(self, *args, **kwargs):
        result = original_to(self, *args, **kwargs)
        target = torch._C._nn._parse_to(*args, **kwargs)[0]
        if target is not None:
            _moved(self, torch.device(target))
        return result

    def cuda(self, device_index=None):
        result = original_cuda(self, device_index)
        _moved(self, torch.device("cuda", device_index if device_index is not None else
                                  torch.cuda.current_device()))
        return result

    to._comfy_orch = True
    torch.nn.Module.to = to
    torch.nn.Module.cuda = cuda


def _on_worker_device(target):
    kind = worker_device_kind()
    if kind in ("cuda", "hip"):
        return target.type == "cuda"
    return kind == "sim" and target.type == "cpu"


def _moved(module, target):
    global _count
    if _call.current is None or module in _registered or not _on_worker_device(target):
        return
    nbytes = sum(t.numel() * t.element_size()
                 for t in list(module.parameters()) + list(module.buffers()))
    if nbytes == 0:
        return
    import comfy_orch
    _count += 1
    comfy_orch.register_model("%s_%d" % (type(module).__name__, _count), nbytes)
    _registered.add(module)
