"""Where in a pack an exception came from, as the one line a log or an error shows."""

from __future__ import annotations

import os


def where(exc: BaseException, pack_dir: str, frames: int = 3) -> str:
    """" (at nodes/x.py:12 in f, ...)": the last frames of the traceback inside the pack, else
    the last frames of all."""
    import traceback
    stack = [f for f in traceback.extract_tb(exc.__traceback__)
             if not f.filename.startswith("<")]  # importlib's frozen frames say nothing
    root = os.path.abspath(pack_dir) + os.sep
    own = [f for f in stack if os.path.abspath(f.filename).startswith(root)] or list(stack)
    if not own:
        return ""
    places = ["%s:%s in %s" % (os.path.relpath(f.filename, pack_dir)
                               if os.path.abspath(f.filename).startswith(root) else f.filename,
                               f.lineno, f.name) for f in own[-frames:]]
    return " (at %s)" % ", ".join(reversed(places))
