"""A pack's messages for ComfyUI's clients, from its worker (docs/comfyui.md, "A pack's
messages"): what `PromptServer.instance.send_sync` and its kin take, in ComfyUI's forms, handed
to liborch_worker.so's orch_worker_message, which sends them to the host after the node's
progress. The host passes them to ComfyUI's own server (under `launch`) or to serve's clients.

- A named event's data crosses as JSON; one that is not JSON-safe is dropped with a warning (in
  ComfyUI it fails later, in the server's loop, the same way: the caller is not told).
- A binary event's bytes stay bytes.
- An image (UNENCODED_PREVIEW_IMAGE, PREVIEW_IMAGE_WITH_METADATA) is encoded here as ComfyUI's
  server does (resized within its max_size, JPEG quality 95 or PNG level 1): the image is a PIL
  image of this env, which the host cannot read.
- A node's progress preview (comfy.utils.ProgressBar, a sampler's latent preview) goes with its
  progress as RGB pixels (preview()), so ComfyUI's own hook chooses its form per client.

Sent, dropped by the worker for a flood, or refused: each dropped kind is said once."""

from __future__ import annotations

import ctypes
import io
import json
import logging
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_log = logging.getLogger("comfy_orch")
_said: set[str] = set()
_lib: Any = None
PREVIEW_IMAGE, UNENCODED_PREVIEW_IMAGE, PREVIEW_IMAGE_WITH_METADATA = 1, 2, 4
# A preview's pixels, with the rest of its message, must fit one frame (1 MiB).
MAX_PREVIEW_PIXEL_BYTES = (1 << 20) - (4 << 10)


def attach(lib: Any) -> None:
    """liborch_worker.so, once it has orch_worker_message (ORCH_WORKER_1.2)."""
    global _lib
    if hasattr(lib, "orch_worker_message"):
        lib.orch_worker_message.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                            ctypes.c_size_t]
        lib.orch_worker_message.restype = ctypes.c_int32
        _lib = lib


def send(event: str | int, data: Any, sid: str | None) -> None:
    """ComfyUI's PromptServer.send(event, data, sid), from the worker."""
    sid = sid if isinstance(sid, str) and sid else None
    if isinstance(event, int) and not isinstance(event, bool):
        if event == UNENCODED_PREVIEW_IMAGE:
            event, data = PREVIEW_IMAGE, _encoded_preview(data)
        elif event == PREVIEW_IMAGE_WITH_METADATA:
            image, metadata = data
            data = _encoded_with_metadata(image, metadata)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            return _say("binary event %d" % event, "its data is not bytes")
        _send({"event": event, "sid": sid}, "data", bytes(data), "event %d" % event)
        return
    try:
        body = json.dumps({"event": str(event), "data": data, "sid": sid}, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return _say("event %r" % (event,), "its data is not JSON: %s" % exc)
    _send_text(body, "event %r" % (event,))


def preview(node: str, value: int, total: int, image_data: Any) -> bool:
    """A node's progress with its preview (format, PIL image, max_size); False when it could not
    be sent (the caller then sends the progress alone)."""
    try:
        image_type, image, max_size = image_data
        image = _contained(image, max_size).convert("RGB")
        if image.width * image.height * 3 > MAX_PREVIEW_PIXEL_BYTES:
            scale = (MAX_PREVIEW_PIXEL_BYTES / (image.width * image.height * 3)) ** 0.5
            image = image.resize((max(1, int(image.width * scale)),
                                  max(1, int(image.height * scale))))
        body = {"node": node, "value": int(value), "max": int(total),
                "preview": {"format": str(image_type).upper(), "width": image.width,
                            "height": image.height, "max_size": int(max_size or 0)}}
    except Exception as exc:  # noqa: BLE001 - a pack's preview of any shape
        _say("preview", "it is not (format, PIL image, max_size): %s" % exc)
        return False
    return _send(body, "pixels", image.tobytes(), "preview") == 0


def _contained(image: Any, max_size: Any) -> Any:
    if not max_size:
        return image
    from PIL import Image, ImageOps  # type: ignore[import-untyped]  # loaded: the image is one
    return ImageOps.contain(image, (int(max_size), int(max_size)), Image.Resampling.BILINEAR)


def _encoded(image_data: Any) -> tuple[str, bytes]:
    image_type, image, max_size = image_data
    out = io.BytesIO()
    _contained(image, max_size).save(out, format=image_type, quality=95, compress_level=1)
    return str(image_type), out.getvalue()


def _encoded_preview(image_data: Any) -> bytes:
    image_type, encoded = _encoded(image_data)
    return struct.pack(">I", 2 if image_type == "PNG" else 1) + encoded


def _encoded_with_metadata(image_data: Any, metadata: Any) -> bytes:
    image_type, encoded = _encoded(image_data)
    metadata = dict(metadata or {}, image_type="image/png" if image_type == "PNG"
                    else "image/jpeg")
    text = json.dumps(metadata).encode("utf-8")
    return struct.pack(">I", len(text)) + text + encoded


def _send(body: dict[str, Any], key: str, raw: bytes, what: str) -> int:
    if _lib is None:
        _say(what, "the worker library is older than this package")
        return 1
    status = int(_lib.orch_worker_message(json.dumps(body).encode(), key.encode(), raw, len(raw)))
    _said_status(status, what)
    return status


def _send_text(body: str, what: str) -> None:
    if _lib is None:
        return _say(what, "the worker library is older than this package")
    _said_status(int(_lib.orch_worker_message(body.encode(), None, None, 0)), what)


def _said_status(status: int, what: str) -> None:
    if status == 1:
        _say(what, "the channel to the host is full (a flood of messages) or gone")
    elif status != 0:
        _say(what, "it is larger than a message may be (1 MiB)")


def _say(what: str, why: str) -> None:
    if what not in _said:
        _said.add(what)
        _log.warning("[comfy-orch] a message for ComfyUI's clients (%s) was dropped: %s "
                     "(said once)", what, why)
