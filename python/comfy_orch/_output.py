"""print and logging from a pack reach the host's log, tagged with the env (docs/python.md):
sys.stdout and sys.stderr become line writers into the worker's log, and the root logger gets a
handler that keeps each record's level. Lines from several threads never interleave.

`logging` itself is not imported here: a pack that never uses it (numpy alone does not) would pay
its import (5 ms) in every worker's start. The handler goes in when something imports it."""

import sys
import threading

from . import _abi, _import_hooks


class _LineWriter:
    def __init__(self, lib, level, name):
        self._lib = lib
        self._level = level
        self._lock = threading.Lock()
        self._partial = {}
        self.name = name
        self.encoding = "utf-8"
        self.errors = "replace"

    def write(self, text):
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

    def flush(self):
        me = threading.get_ident()
        with self._lock:
            rest = self._partial.pop(me, "")
        if rest:
            self._lib.orch_worker_log(self._level, rest.encode("utf-8", "replace"))

    def isatty(self):
        return False

    def writable(self):
        return True


def _log_handler(logging, lib):
    class LogHandler(logging.Handler):
        def emit(self, record):
            try:
                level = (_abi.LOG_ERROR if record.levelno >= logging.ERROR else
                         _abi.LOG_WARN if record.levelno >= logging.WARNING else
                         _abi.LOG_INFO if record.levelno >= logging.INFO else _abi.LOG_DEBUG)
                lib.orch_worker_log(level, self.format(record).encode("utf-8", "replace"))
            except Exception:  # a log line must never fail the node
                pass

    handler = LogHandler()
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level == logging.WARNING:  # the default: let a pack's info lines through
        root.setLevel(logging.INFO)


def forward(lib):
    sys.stdout = _LineWriter(lib, _abi.LOG_INFO, "<stdout>")
    sys.stderr = _LineWriter(lib, _abi.LOG_WARN, "<stderr>")
    _import_hooks.after_import("logging", lambda logging: _log_handler(logging, lib))
