"""A worker's traceback as frames of the error ComfyUI's process raises (docs/comfyui.md): the
pack's file, line and function show in ComfyUI's log and in the execution_error it sends the
page (traceback.format_tb), after its own frames, as when the pack runs in-process. The files
are the pack's on this machine, so the lines of source show too."""

from __future__ import annotations

import os
import re
import stat
import types

_FRAME = re.compile(r'\s*File "(?P<file>[^"]{1,4096})", line (?P<line>\d{1,7}), in '
                    r'(?P<name>[^\n]{1,200})')
# The worker's own calling frames: in-process, ComfyUI's executor stands in their place.
_WORKER_RUNTIME = "/comfy_orch/worker/"
_MAX_FRAMES = 64  # a worker's traceback is untrusted text: a bounded number of frames
# traceback.format_tb reads each frame's source line from its file (linecache): only regular
# files of a source's size are named, never a device, a pipe or a huge file a worker points at.
_MAX_SOURCE_BYTES = 16 << 20


def _readable_source(filename: str) -> bool:
    try:
        st = os.stat(filename)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size <= _MAX_SOURCE_BYTES


def _frame(exc: BaseException, filename: str, line: int, name: str) -> types.TracebackType | None:
    """One traceback entry at `filename`:`line` in `name`: code compiled there raises `exc`."""
    try:
        # The statement spans wider than any source line, so a traceback marks no columns of the
        # pack's line (they would be this statement's, not the pack's expression).
        code = compile("raise (__orch_exc__" + " " * 1024 + ")", filename, "exec")
        code = code.replace(co_name=name, co_firstlineno=line)
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
        if (m is not None and int(m["line"]) > 0 and _WORKER_RUNTIME not in m["file"]
                and _readable_source(m["file"])):
            frames.append((m["file"], int(m["line"]), m["name"].strip()))
    head: types.TracebackType | None = None
    for filename, line, name in reversed(frames):
        tb = _frame(exc, filename, line, name)
        if tb is not None:
            tb.tb_next = head
            head = tb
    exc.__traceback__ = None
    return exc.with_traceback(head) if head is not None else exc
