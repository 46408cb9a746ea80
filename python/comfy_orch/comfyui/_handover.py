"""A worker's object handed to a node of another env (docs/comfyui.md, "Objects across envs"):
its owner's internal class orch.export:<env> gives what crosses (its registered serializer's
payload, else its pickle as a pool tensor, never unpickled in ComfyUI's process), which the
receiving worker rebuilds; an object of ComfyUI's own process crosses to a worker as its pickle
too. Each type that crosses by pickle is said once, with its cost."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from .._shared import serializers

if TYPE_CHECKING:
    from ..host import Host
    from ._proxies import WorkerObject

_log = logging.getLogger("comfy_orch")
_lock = threading.Lock()
_said: set[tuple[str, str, str]] = set()


def pickled(value: Any, env: str) -> dict[str, Any]:
    """An object of ComfyUI's process (a pack's in-process node made it) as a worker of `env`
    is given it: its pickle, in the form a worker's export has (worker/_crossing.py), which the
    worker unpickles. Refused here, naming the type and the fix, where it cannot be pickled."""
    import numpy
    name = "%s.%s" % (type(value).__module__, type(value).__qualname__)
    if _is_model(value):
        raise TypeError("a %s of ComfyUI's process cannot cross to env %s: models do not move "
                        "between processes; load it with a node of env %s, or use a node of "
                        "ComfyUI's own" % (name, env, env))
    try:
        data = serializers.capped_pickle(value)
    except serializers.PickleTooLarge as exc:
        raise ValueError("a %s of ComfyUI's process cannot cross to env %s: %s; register a "
                         "serializer for it (comfy_env.register_serializer)"
                         % (name, env, exc)) from None
    except Exception as exc:  # noqa: BLE001 - whatever the object's __reduce__ raises
        raise TypeError("a %s of ComfyUI's process cannot cross to env %s: it cannot be pickled "
                        "(%s: %s); register a serializer for it (comfy_env.register_serializer)"
                        % (name, env, type(exc).__name__, exc)) from None
    said = (name, "ComfyUI", env)
    with _lock:
        first = said not in _said
        _said.add(said)
    if first:
        _log.info("[comfy-orch] a %s crosses from ComfyUI's process to env %s pickled (%d "
                  "bytes); register a serializer for it (comfy_env.register_serializer) to "
                  "choose what crosses", name, env, len(data))
    return {serializers.PICKLE: name, "env": "ComfyUI", "data": numpy.frombuffer(data, numpy.uint8)}


def handed_over(host: Host, obj: WorkerObject, env: str) -> Any:
    """What env `env`'s worker is given for `obj`, an object of another env's worker."""
    start = time.monotonic()
    value = host.execute(serializers.EXPORT_PREFIX + obj.env, {"value": obj.handle},
                         node="export").outputs
    crossing = value[0] if value else None
    if isinstance(crossing, dict) and isinstance(crossing.get(serializers.PICKLE), str):
        said = (crossing[serializers.PICKLE], obj.env, env)
        with _lock:
            first = said not in _said
            _said.add(said)
        if first:
            data = serializers.decode(crossing.get("data"))  # {NDARRAY: view} from a torch env
            _log.info("[comfy-orch] a %s crosses from env %s to env %s pickled (%d bytes, %.1f "
                      "ms to export); register a serializer for it (comfy_env."
                      "register_serializer) to choose what crosses", said[0], obj.env, env,
                      _size(data), (time.monotonic() - start) * 1e3)
    return crossing


def _size(data: Any) -> int:
    """Bytes of the pickle's view: numpy's nbytes, or a torch tensor's (torch 1.13 has no
    nbytes)."""
    if hasattr(data, "nbytes"):
        return int(data.nbytes)
    return int(data.numel() * data.element_size()) if hasattr(data, "numel") else 0


def _is_model(value: Any) -> bool:
    """A torch module, or an object that wraps one (ComfyUI's ModelPatcher, its VAE, CLIP):
    weights, which never move between processes."""
    import sys
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    module = torch.nn.Module
    return isinstance(value, module) or any(
        isinstance(getattr(value, attr, None), module)
        for attr in ("model", "first_stage_model", "cond_stage_model", "patcher"))
