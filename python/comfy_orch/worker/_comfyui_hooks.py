"""ComfyUI's own progress and interrupt machinery inside a worker (docs/python.md), so existing
packs report progress and stop on an interrupt unchanged. Installed only into modules the pack
itself imported (comfy.utils, comfy.model_management): importing them here would start what
they start (torch, the device) in packs that never asked for it.

ComfyUI's modules are not type-checked here: what this reads of them is Any."""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time

from .._shared import import_hooks
from . import _call, _messages

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any


def import_as_main_does(root: str) -> None:
    """What ComfyUI's main.py imports before any pack, where a pack's imports depend on it: its
    `utils` package. nodes.py puts comfy/ first on sys.path, so in a process that had not
    imported ComfyUI's utils first, `import server` (through app.frontend_management's
    utils.install_util) finds comfy/utils.py and fails: "'utils' is not a package"."""
    if os.path.isfile(os.path.join(root, "utils", "__init__.py")) and "utils" not in sys.modules:
        importlib.import_module("utils")


def install_hooks() -> None:
    """ComfyUI's progress hook and interrupt watcher, each as soon as the pack imports the module
    it belongs to, at its import or later inside a node's call."""
    import_hooks.after_import("comfy.utils", _hook_progress)
    import_hooks.after_import("comfy.model_management", _watch_interrupt_flag)


def _hook_progress(utils: ModuleType) -> None:
    if hasattr(utils, "set_progress_bar_global_hook"):
        utils.set_progress_bar_global_hook(_progress_hook)


def _watch_interrupt_flag(management: ModuleType) -> None:
    if hasattr(management, "interrupt_current_processing"):
        # Node code may hold ComfyUI's check under any name it imported it as, so the interrupt
        # reaches it through ComfyUI's own flag: a watcher sets it while a call runs.
        threading.Thread(target=_watch_interrupts, args=(management,), name="comfy_orch-interrupt",
                         daemon=True).start()


def _watch_interrupts(management: ModuleType) -> None:
    while True:
        with _call.lock:
            call = _call.current
            interrupted = call is not None and call.api.interrupted(call.ctx)
        if interrupted:
            management.interrupt_current_processing(True)
        time.sleep(0.005)


def _progress_hook(value: float, total: float, *args: Any, **kwargs: Any) -> None:
    """ComfyUI's hook(value, total, preview, prompt_id=None, node_id=None): the node's progress
    event, then ComfyUI's interrupt check, as ComfyUI's own hook does."""
    call = _call.current
    if call is None:
        return
    preview = args[0] if args else kwargs.get("preview")
    if preview is None or not _messages.preview(call.node_id, int(value), int(total), preview):
        call.api.progress(call.ctx, int(value), int(total))
    if call.api.interrupted(call.ctx):
        management = sys.modules.get("comfy.model_management")
        if management is not None:
            management.interrupt_current_processing(True)
            management.throw_exception_if_processing_interrupted()
        raise _call.Interrupted("the prompt was interrupted")


def begin_call() -> None:
    """A new call starts with ComfyUI's flag down (an interrupt belongs to its own prompt)."""
    management = sys.modules.get("comfy.model_management")
    if management is not None and hasattr(management, "interrupt_current_processing"):
        management.interrupt_current_processing(False)
