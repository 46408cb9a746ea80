"""What the host says when it refuses or fails (docs/host-library.md): HostError, and NodeError
for a node (or its worker) that failed, with the host's status code read as "not now" or
"never"."""

from __future__ import annotations

from typing import Any

from .._shared import abi

OK, INVALID, FAILED = abi.HOST_OK, abi.HOST_INVALID, abi.HOST_FAILED


class HostError(RuntimeError):
    """The host refused or failed: `code` is the error's type, as ComfyUI names errors. Where
    the host read a deployment and found errors, the message lists each one (file, line, key,
    what is wrong, how to fix it), as `comfy-orch validate` would: a log shows only the
    message."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        self.code = code
        self.message = message
        self.details: dict[str, Any] = details or {}  # the host's JSON
        super().__init__("%s: %s%s" % (code, message, _diagnostic_lines(self.details)))


def _diagnostic_lines(details: object) -> str:
    """"\n  FILE:LINE:COLUMN: error: KEY: MESSAGE\n    fix: FIX" for each error diagnostic."""
    lines = []
    for d in details.get("diagnostics", []) if isinstance(details, dict) else []:
        if not isinstance(d, dict) or d.get("severity") != "error":
            continue
        where = ":".join(str(d[k]) for k in ("file", "line", "column") if d.get(k))
        key = "%s: " % d["key"] if d.get("key") else ""
        lines.append("\n  %s: error: %s%s" % (where or "deployment", key, d.get("message", "")))
        if d.get("fix"):
            lines.append("\n    fix: %s" % d["fix"])
    return "".join(lines)


class NodeError(HostError):
    """A node (or its worker) failed: `node` is its id, `traceback` the worker's lines.
    `interrupted` (the node stopped for an interrupt) and `retryable` (its worker was lost or
    is not ready: the same call may run later) say "not now" apart from "never", as the host's
    status code says it."""

    def __init__(self, error: dict[str, Any], status: int = FAILED) -> None:
        super().__init__(error.get("type", "node_error"), error.get("message", ""), error)
        self.node: str | None = error.get("node")
        self.traceback: list[str] | None = error.get("traceback")
        self.interrupted = status == abi.HOST_INTERRUPTED
        self.retryable = status == abi.HOST_RETRYABLE
