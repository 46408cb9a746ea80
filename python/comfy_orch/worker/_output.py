"""print and logging from a pack reach the host's log, tagged with the env (docs/python.md):
sys.stdout and sys.stderr become line writers into the worker's log, and the root logger gets a
handler that keeps each record's level. Lines from several threads never interleave.

`logging` itself is not imported here: a pack that never uses it (numpy alone does not) would pay
its import (5 ms) in every worker's start. The handler goes in when something imports it."""

from __future__ import annotations

import sys
import threading

from .._shared import abi, import_hooks

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    import ctypes


class _LineWriter:
    """A text stream (what print and tracebacks write to) whose lines go to the worker's log."""

    def __init__(self, lib: ctypes.CDLL, level: int, name: str) -> None:
        self._lib = lib
        self._level = level
        self._lock = threading.Lock()
        self._partial: dict[int, str] = {}
        self.name = name
        self.encoding = "utf-8"
        self.errors = "replace"

    def write(self, text: object) -> int:
        if not isinstance(text, str):
            text = str(text)
        me = threading.get_ident()
        with self._lock:
            pending = self._partial.pop(me, "") + text
            *lines, rest = pending.split("\n")
            if rest:
                self._partial[me] = rest
        for line in lines:
            self._lib.orch_worker_log(self._level, line.encode("utf-8", "replace"))
        return len(text)

    def flush(self) -> None:
        me = threading.get_ident()
        with self._lock:
            rest = self._partial.pop(me, "")
        if rest:
            self._lib.orch_worker_log(self._level, rest.encode("utf-8", "replace"))

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True


def _log_handler(lib: ctypes.CDLL) -> None:
    import logging  # imported already: this runs once something imported it

    class LogHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                level = (abi.LOG_ERROR if record.levelno >= logging.ERROR else
                         abi.LOG_WARN if record.levelno >= logging.WARNING else
                         abi.LOG_INFO if record.levelno >= logging.INFO else abi.LOG_DEBUG)
                lib.orch_worker_log(level, self.format(record).encode("utf-8", "replace"))
            except Exception:  # a log line must never fail the node
                pass

    handler = LogHandler()
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level == logging.WARNING:  # the default: let a pack's info lines through
        root.setLevel(logging.INFO)


def forward(lib: ctypes.CDLL) -> None:
    """print and logging into the worker's log from now on."""
    sys.stdout = _LineWriter(lib, abi.LOG_INFO, "<stdout>")
    sys.stderr = _LineWriter(lib, abi.LOG_WARN, "<stderr>")
    import_hooks.after_import("logging", lambda _logging: _log_handler(lib))
