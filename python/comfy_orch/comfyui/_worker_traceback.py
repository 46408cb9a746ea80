"""A worker's traceback as frames of the error ComfyUI's process raises (docs/comfyui.md): the
pack's file, line and function show in ComfyUI's log and in the execution_error it sends the
page (traceback.format_tb), after its own frames, as when the pack runs in-process. The files
are the pack's on this machine, so the lines of source show too."""

from __future__ import annotations

import re
import types

_FRAME = re.compile(r'\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>[^\n]+)')
# The worker's own calling frames: in-process, ComfyUI's executor stands in their place.
_WORKER_RUNTIME = "/comfy_orch/worker/"
_MAX_FRAMES = 64  # a worker's traceback is untrusted text: a bounded number of frames


def _frame(exc: BaseException, filename: str, line: int, name: str) -> types.TracebackType | None:
    """One traceback entry at `filename`:`line` in `name`: code compiled there raises `exc`."""
    try:
        # The statement spans wider than any source line, so a traceback marks no columns of the
        # pack's line (they would be this statement's, not the pack's expression).
        code = compile("\n" * (line - 1) + "raise (__orch_exc__" + " " * 1024 + ")", filename,
                       "exec")
        code = code.replace(co_name=name)
    except (SyntaxError, ValueError, TypeError):
        return None
    try:
        exec(code, {"__name__": "comfy_orch.worker_frame", "__orch_exc__": exc})
    except BaseException as raised:  # noqa: B902 - it is the exception raised just above
        tb = raised.__traceback__
        return tb.tb_next if tb is not None else None  # the compiled code's own frame
    return None


def attach(exc: BaseException, lines: list[str] | None) -> BaseException:
    """`exc` with the frames of `lines` (traceback.format_tb's strings, from the worker) as its
    traceback; unchanged where none parse."""
    frames = []
    for text in (lines or [])[-_MAX_FRAMES:]:
        m = _FRAME.match(text) if isinstance(text, str) else None
        if m is not None and 0 < int(m["line"]) < 1 << 20 and _WORKER_RUNTIME not in m["file"]:
            frames.append((m["file"], int(m["line"]), m["name"].strip()[:200]))
    head: types.TracebackType | None = None
    for filename, line, name in reversed(frames):
        tb = _frame(exc, filename, line, name)
        if tb is not None:
            tb.tb_next = head
            head = tb
    exc.__traceback__ = None
    return exc.with_traceback(head) if head is not None else exc
