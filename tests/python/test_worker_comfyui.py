"""What a worker gives ComfyUI's modules and a pack's output (worker/_prompt_server.py,
_shared/import_hooks.py, worker/_output.py), with no ComfyUI and no worker library."""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

from comfy_orch._shared import abi, import_hooks
from comfy_orch.worker import _prompt_server
from comfy_orch.worker._output import _LineWriter


def test_a_packs_routes_are_recorded_and_said_not_served(caplog: pytest.LogCaptureFixture) -> None:
    server = _prompt_server.WorkerPromptServer()

    @server.routes.get("/my/route")
    async def handler() -> None:
        pass

    server.routes.route("post", "/other")(handler)
    assert server.routes.registered == [("GET", "/my/route"), ("POST", "/other")]
    assert "GET /my/route registered by" in caplog.text and "is not served" in caplog.text
    assert list(server.routes) == []


def test_messages_are_accepted_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    server = _prompt_server.WorkerPromptServer()
    server.send_sync("progress", {})
    server.send_sync("progress", {})
    assert caplog.text.count("send_sync('progress') in a worker does not reach") == 1
    assert server.client_id is None
    with pytest.raises(AttributeError, match="PromptServer.instance.loop is not available"):
        server.loop  # noqa: B018 - the read is the test


def test_comfyuis_server_class_gets_an_instance_once_imported() -> None:
    class PromptServer:
        instance: Any = None

    server = ModuleType("server")
    setattr(server, "PromptServer", PromptServer)
    _prompt_server._give_instance(server)
    assert isinstance(PromptServer.instance, _prompt_server.WorkerPromptServer)


def test_after_import_runs_now_or_right_after_the_module_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    import_hooks.after_import("json", lambda m: seen.append(m.__name__))
    assert seen == ["json"]
    (tmp_path / "orch_late_module.py").write_text("VALUE = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import_hooks.after_import("orch_late_module", lambda m: seen.append("late %d" % m.VALUE))
    assert seen == ["json"]
    importlib.util.find_spec("orch_late_module")  # finding is not importing
    assert seen == ["json"]
    importlib.import_module("orch_late_module")
    assert seen == ["json", "late 3"]
    assert not any(type(f).__name__ == "_Watch" for f in sys.meta_path)
    del sys.modules["orch_late_module"]


class _AsksEveryFinder:
    """A pack's own import hook for one name (as the real-ComfyUI tools' torch shim): it asks
    every other finder, with no guard of its own."""

    def __init__(self, name: str) -> None:
        self.name, self.asked = name, 0

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.name:
            return None
        self.asked += 1
        for finder in [f for f in sys.meta_path if f is not self]:
            spec = getattr(finder, "find_spec", lambda *a: None)(name, path, target)
            if spec is not None:
                return spec
        return None


def test_a_hook_that_asks_every_finder_does_not_recurse_with_ours(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "orch_asked_module.py").write_text("VALUE = 5\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    other = _AsksEveryFinder("orch_asked_module")
    seen: list[int] = []
    import_hooks.after_import("orch_asked_module", lambda m: seen.append(m.VALUE))
    sys.meta_path.insert(0, other)
    try:
        importlib.import_module("orch_asked_module")  # RecursionError without the guard
    finally:
        sys.meta_path.remove(other)
        sys.modules.pop("orch_asked_module", None)
    assert seen == [5]
    assert other.asked >= 1


class FakeLibrary:
    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []

    def orch_worker_log(self, level: int, text: bytes) -> None:
        self.lines.append((level, text.decode()))


def test_output_reaches_the_log_one_whole_line_at_a_time() -> None:
    lib = FakeLibrary()
    writer = _LineWriter(cast(ctypes.CDLL, lib), abi.LOG_INFO, "<stdout>")
    writer.write("step 1")
    writer.write(" of 2\nstep 2")
    assert lib.lines == [(abi.LOG_INFO, "step 1 of 2")]
    writer.flush()
    assert lib.lines[-1] == (abi.LOG_INFO, "step 2")
    assert writer.write(b"bytes") == len("b'bytes'") and not writer.isatty()


def test_log_records_keep_their_level(monkeypatch: pytest.MonkeyPatch) -> None:
    from comfy_orch.worker import _output
    lib = FakeLibrary()
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", root.level)
    _output._log_handler(cast(ctypes.CDLL, lib))
    logging.getLogger("pack").warning("careful")
    logging.getLogger("pack").error("broken")
    assert lib.lines == [(abi.LOG_WARN, "pack: careful"), (abi.LOG_ERROR, "pack: broken")]
