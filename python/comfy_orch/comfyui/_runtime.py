"""The one host runtime of a ComfyUI process (docs/comfyui.md): started by the first
register_nodes() over the ComfyUI tree that pack lives in, shared by every later one, stopped at
exit. $COMFY_ORCH_DEPLOYMENT names a deployment file to use instead of the tree's description."""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

from .._shared import comfyui_args
from ..host import Host
from . import _memory, _messages
from ._stand_ins import StandIns

_log = logging.getLogger("comfy_orch")
_lock = threading.Lock()
_host: Host | None = None
_stand_ins: StandIns | None = None  # worker models in current_loaded_models, when integrated


def comfyui_root(pack_dir: str) -> str | None:
    """The ComfyUI tree a custom_nodes pack lives in: <root>/custom_nodes/<pack>."""
    parent = os.path.dirname(os.path.abspath(pack_dir))
    return os.path.dirname(parent) if os.path.basename(parent) == "custom_nodes" else None


def _device() -> str:
    """ComfyUI's own device choice, as far as the host needs it: cpu when ComfyUI runs on the
    CPU (--cpu) or torch sees no GPU, else the first CUDA device."""
    args = getattr(sys.modules.get("comfy.cli_args"), "args", None)
    if args is not None and getattr(args, "cpu", False):
        return "cpu"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return "cuda:0"
    return "cpu"


def description_for(root: str) -> dict[str, Any]:
    """The host of ComfyUI tree `root` (liborch_host.so builds its deployment, host.h): its
    custom_nodes, the device ComfyUI uses, its memory flags and its aimdo's level (_memory.py)."""
    host, memory, why = _memory.deployment_settings()
    _log.info("[comfy-orch] host memory settings: %s", "; ".join(why))
    return dict(host, root=root, custom_nodes=os.path.join(root, "custom_nodes"),
                device=_device(), memory=memory)


def _on_event(kind: str, data: Any) -> None:
    if kind == "message":
        _messages.deliver(data)
    elif kind == "progress":
        _progress(data)


def _progress(data: Any) -> None:
    hook = getattr(sys.modules.get("comfy.utils"), "PROGRESS_BAR_HOOK", None)
    if hook is None:
        return
    try:
        hook(data.get("value", 0), data.get("max", 0), None, node_id=data.get("node"))
    except TypeError:  # an older ComfyUI's hook takes no node_id
        hook(data.get("value", 0), data.get("max", 0), None)


def host(pack_dir: str) -> Host:
    """The process's host, started on first use."""
    global _host
    with _lock:
        if _host is None:
            deployment = os.environ.get("COMFY_ORCH_DEPLOYMENT") or None
            description: dict[str, Any] | None = None
            if deployment is None:
                root = comfyui_root(pack_dir)
                if root is None:
                    raise RuntimeError(
                        "comfy_orch: %s is not in a ComfyUI custom_nodes directory; set "
                        "COMFY_ORCH_DEPLOYMENT to a deployment file" % pack_dir)
                description = description_for(root)
            args = getattr(sys.modules.get("comfy.cli_args"), "args", None)
            if args is not None:
                comfyui_args.export(args)  # before the workers start
            _host = Host(deployment, on_event=_on_event, comfyui=description)
            atexit.register(stop)
            _stop_on_signals()
            global _stand_ins
            _stand_ins = _memory.integrate(_host)
            state = _host.nodes()
            _log.info("[comfy-orch] active: %d envs isolated, %d not (%s)",
                      len(state["workers"]), len(state["skipped"]),
                      deployment or "ComfyUI tree %s" % (description or {}).get("root"))
        return _host


def _stop_on_signals() -> None:
    """SIGTERM and SIGHUP end ComfyUI without running atexit when nobody handles them, which
    would leave the workers to be killed by their parent-death signal mid-node. Where ComfyUI
    keeps their default, the signal instead interrupts the running worker node and exits through
    SystemExit (status 128 + signal, as a shell reports a signal's death), so atexit stops the
    workers gracefully. A handler ComfyUI or a pack installed is left alone."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal.signal works only there; the default stays

    def graceful(signum: int, _frame: FrameType | None) -> None:
        for s in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)  # a second signal kills at once
        _log.warning("[comfy-orch] %s: interrupting the workers and stopping them",
                     signal.Signals(signum).name)
        host = _host
        if host is not None:
            try:
                host.interrupt()
            except Exception:  # already stopped
                pass
        raise SystemExit(128 + signum)

    for s in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(s) is signal.SIG_DFL:
            signal.signal(s, graceful)


def after_node() -> None:
    """A proxy's node ended (a node boundary): ComfyUI's list of loaded models follows the
    workers' models."""
    stand_ins = _stand_ins
    if stand_ins is not None:
        stand_ins.sync()


def stop() -> None:
    global _host, _stand_ins
    with _lock:
        _stand_ins = None
        _memory.detach()
        if _host is not None:
            _host.stop()
            _host = None
