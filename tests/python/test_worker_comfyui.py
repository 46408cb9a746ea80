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


def test_a_packs_routes_go_on_aiohttps_own_route_table() -> None:
    from aiohttp import web
    server = _prompt_server.WorkerPromptServer()

    async def handler(request: web.Request) -> web.Response:
        return web.Response()

    server.routes.get("/my/route")(handler)
    server.routes.route("post", "/other")(handler)
    assert isinstance(server.routes, web.RouteTableDef)
    assert [(r.method, r.path) for r in server.routes  # type: ignore[attr-defined]
            ] == [("GET", "/my/route"), ("post", "/other")]


def test_without_aiohttp_routes_are_recorded_and_said_not_served(
        caplog: pytest.LogCaptureFixture) -> None:
    routes = _prompt_server.UnservedRoutes()
    routes.get("/my/route")(print)
    assert routes.registered == [("GET", "/my/route")]
    assert "GET /my/route registered by" in caplog.text and "no aiohttp" in caplog.text
    assert list(routes) == []


class _FakeLibrary:
    """liborch_worker.so's orch_worker_message, recording what it was given."""

    def __init__(self, answer: int = 0) -> None:
        self.sent: list[tuple[dict[str, Any], bytes | None]] = []
        self.answer = answer
        self.orch_worker_message = self

    def __call__(self, body: bytes, key: bytes | None, raw: bytes | None, size: int) -> int:
        import json
        message = json.loads(body)
        self.sent.append((message, None if raw is None else bytes(raw[:size])))
        return self.answer


def test_messages_go_to_the_worker_library_in_comfyuis_forms(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from comfy_orch.worker import _messages
    lib = _FakeLibrary()
    monkeypatch.setattr(_messages, "_lib", lib)
    server = _prompt_server.WorkerPromptServer()
    server.send_sync("my.event", {"a": [1]}, "client-1")
    server.send_progress_text("half way", "12")
    server.send_sync(9, b"\x00raw")
    assert lib.sent == [
        ({"event": "my.event", "data": {"a": [1]}, "sid": "client-1"}, None),
        ({"event": 3, "sid": None}, b"\x00\x00\x00\x0212half way"),
        ({"event": 9, "sid": None}, b"\x00raw")]
    assert server.client_id is None
    _prompt_server.begin_call("client-2")
    assert _prompt_server.instance().client_id == "client-2"
    with pytest.raises(AttributeError, match="PromptServer.instance.loop is not available"):
        server.loop  # noqa: B018 - the read is the test


def test_a_preview_goes_as_rgb_pixels_within_its_max_size(monkeypatch: pytest.MonkeyPatch) -> None:
    from PIL import Image  # type: ignore[import-untyped]

    from comfy_orch.worker import _messages
    lib = _FakeLibrary()
    monkeypatch.setattr(_messages, "_lib", lib)
    assert _messages.preview("5", 1, 4, ("JPEG", Image.new("RGBA", (100, 50), (1, 2, 3, 255)), 40))
    (body, raw), = lib.sent
    assert body == {"node": "5", "value": 1, "max": 4, "preview": {
        "format": "JPEG", "width": 40, "height": 20, "max_size": 40}}
    assert raw == bytes([1, 2, 3]) * 800


def test_messages_that_cannot_go_are_dropped_and_said_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from comfy_orch.worker import _messages
    monkeypatch.setattr(_messages, "_lib", _FakeLibrary(answer=1))
    monkeypatch.setattr(_messages, "_said", set())
    for _ in range(3):
        _messages.send("flood", {}, None)
    _messages.send("odd", {"x": object()}, None)
    _messages.send(7, "not bytes", None)
    assert caplog.text.count("(event 'flood') was dropped: the channel to the host is full") == 1
    assert "(event 'odd') was dropped: its data is not JSON" in caplog.text
    assert "(binary event 7) was dropped: its data is not bytes" in caplog.text
    assert not _messages.preview("1", 1, 2, "not a preview")


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
