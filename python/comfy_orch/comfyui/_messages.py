"""A worker's messages for ComfyUI's clients, given to ComfyUI's own server (docs/comfyui.md, "A
pack's messages"): the host library's "message" events (host.h), on its event thread, become
what the pack's call would have done in ComfyUI's process:

- a message: `PromptServer.instance.send_sync(event, data, sid)`, which is thread-safe (it puts
  the message on the server loop's queue), so it keeps its place among the node's executing and
  progress messages; a binary event's bytes are bytes again;
- a node's progress preview: ComfyUI's progress hook with the preview rebuilt as a PIL image, as
  `comfy.utils.ProgressBar` calls it, so ComfyUI encodes it, sends it as PREVIEW_IMAGE or, to a
  client whose feature flags ask for it, PREVIEW_IMAGE_WITH_METADATA, and keeps its progress.

ComfyUI's objects are ComfyUI's, not type-checked here: Any."""

from __future__ import annotations

import base64
import logging
import sys
from typing import Any

_log = logging.getLogger("comfy_orch")


def deliver(data: dict[str, Any]) -> None:
    try:
        if "preview" in data:
            _preview(data)
        else:
            _message(data)
    except Exception as exc:  # noqa: BLE001 - on the host's thread: said, never raised
        _log.warning("[comfy-orch] a message from env %s did not reach ComfyUI's clients: %s",
                     data.get("env"), exc)


def _message(data: dict[str, Any]) -> None:
    instance = getattr(getattr(sys.modules.get("server"), "PromptServer", None), "instance", None)
    if instance is None:
        return
    event, payload = data.get("event"), data.get("data")
    if isinstance(event, int) and isinstance(payload, dict):
        payload = base64.b64decode(str(payload.get("base64", "")))
    instance.send_sync(event, payload, data.get("sid"))


def _preview(data: dict[str, Any]) -> None:
    hook = getattr(sys.modules.get("comfy.utils"), "PROGRESS_BAR_HOOK", None)
    if hook is None:
        return
    from PIL import Image  # type: ignore[import-untyped]  # ComfyUI's process has it
    p = data["preview"]
    image = Image.frombytes("RGB", (int(p["width"]), int(p["height"])),
                            base64.b64decode(p["pixels"]))
    preview = (p["format"], image, int(p["max_size"]) or None)
    try:
        hook(data.get("value", 0), data.get("max", 0), preview, node_id=data.get("node"))
    except TypeError:  # an older ComfyUI's hook takes no node_id
        hook(data.get("value", 0), data.get("max", 0), preview)
