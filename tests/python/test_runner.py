"""One call into a pack's class through the node ABI (worker/_runner.py), as liborch_worker.so
makes it: the node set's function pointers called with a context, input and output values."""

from __future__ import annotations

import json
from typing import Any

import pytest

import comfy_orch
from comfy_orch._shared import abi
from comfy_orch.worker import _call
from comfy_orch.worker._runner import Runner
from comfy_orch.worker._schema import NodeSpec
from fake_worker import FakeWorker, values


class Scale:
    RETURN_TYPES = ("INT", "STRING")
    FUNCTION = "scale"

    @classmethod
    def INPUT_TYPES(cls) -> dict[str, Any]:
        return {"required": {"value": ("INT", {"default": 1}), "factor": ("FLOAT",)},
                "optional": {"label": ("STRING",)},
                "hidden": {"node": "UNIQUE_ID", "prompt": "PROMPT"}}

    def scale(self, value: int, factor: float, node: str, prompt: Any,
              label: str = "none") -> Any:
        comfy_orch.progress(1, 2)
        if value < 0:
            raise ValueError("value must not be negative")
        if value == 99:
            comfy_orch.check_interrupted()
        return {"result": (int(value * factor), "%s:%s:%s" % (label, node, sorted(prompt))),
                "ui": {"text": ["scaled"]}}

    @classmethod
    def IS_CHANGED(cls, value: int, factor: float, **hidden: Any) -> float:
        return float("nan") if value == 0 else value * factor


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeWorker:
    monkeypatch.setenv("COMFY_ORCH_TENSORS", "numpy")
    worker = FakeWorker(node="12")
    worker.hidden["PROMPT"] = json.dumps({"12": {"class_type": "Scale"}})
    return worker


def run(fake: FakeWorker, method: str, inputs: Any, outputs: Any) -> int:
    runner = Runner("envA", [NodeSpec("Scale", Scale, None)])
    cls = runner.builder.node_set.classes[0]
    function = {"execute": cls.execute, "fingerprint": cls.is_changed}[method]
    status = int(function(fake.ctx, inputs, outputs))
    assert _call.current is None  # the call ended
    return status


def test_execute_passes_inputs_and_hidden_values_and_fills_the_outputs(
        fake: FakeWorker) -> None:
    outputs = values((abi.VALUE_NONE, None), (abi.VALUE_NONE, None))
    inputs = values((abi.VALUE_INT, 6), (abi.VALUE_FLOAT, 1.5), (abi.VALUE_STRING, "big"))
    assert run(fake, "execute", inputs, outputs) == abi.NODE_OK
    assert (outputs[0].kind, outputs[0].i) == (abi.VALUE_INT, 9)
    assert outputs[1].s == b"big:12:['12']"
    assert fake.progress == [(1, 2)]
    assert [json.loads(u) for u in fake.ui] == [{"text": ["scaled"]}]


def test_an_absent_optional_input_takes_the_methods_own_default(fake: FakeWorker) -> None:
    outputs = values((abi.VALUE_NONE, None), (abi.VALUE_NONE, None))
    inputs = values((abi.VALUE_INT, 2), (abi.VALUE_FLOAT, 2.0), (abi.VALUE_NONE, None))
    assert run(fake, "execute", inputs, outputs) == abi.NODE_OK
    assert outputs[1].s == b"none:12:['12']"


def test_an_exception_fails_the_node_with_its_type_message_and_traceback(
        fake: FakeWorker) -> None:
    outputs = values((abi.VALUE_NONE, None), (abi.VALUE_NONE, None))
    inputs = values((abi.VALUE_INT, -1), (abi.VALUE_FLOAT, 1.0), (abi.VALUE_NONE, None))
    assert run(fake, "execute", inputs, outputs) == abi.NODE_ERROR
    assert fake.failures == [("ValueError", "value must not be negative")]
    # traceback.format_tb, as ComfyUI's execution_error: frames only, the raising one last.
    assert all(frame.startswith('  File "') for frame in fake.traceback)
    assert "raise ValueError" in fake.traceback[-1]


def test_an_interrupt_ends_the_node_as_interrupted_not_failed(fake: FakeWorker) -> None:
    fake.interrupt = True
    outputs = values((abi.VALUE_NONE, None), (abi.VALUE_NONE, None))
    inputs = values((abi.VALUE_INT, 99), (abi.VALUE_FLOAT, 1.0), (abi.VALUE_NONE, None))
    assert run(fake, "execute", inputs, outputs) == abi.NODE_INTERRUPTED
    assert fake.failures == []


def test_is_changed_gives_the_change_key_and_nan_means_always_changed(
        fake: FakeWorker) -> None:
    outputs = values((abi.VALUE_NONE, None))
    inputs = values((abi.VALUE_INT, 3), (abi.VALUE_FLOAT, 0.5), (abi.VALUE_NONE, None))
    assert run(fake, "fingerprint", inputs, outputs) == abi.NODE_OK
    assert (outputs[0].kind, outputs[0].f) == (abi.VALUE_FLOAT, 1.5)
    inputs = values((abi.VALUE_INT, 0), (abi.VALUE_FLOAT, 0.5), (abi.VALUE_NONE, None))
    assert run(fake, "fingerprint", inputs, outputs) == abi.NODE_ERROR
    assert fake.failures == [("always_changed", "IS_CHANGED returned NaN")]


def test_a_result_that_is_not_a_tuple_fails_naming_the_function(fake: FakeWorker) -> None:
    class Loose:
        RETURN_TYPES = ("INT",)
        FUNCTION = "run"

        @classmethod
        def INPUT_TYPES(cls) -> dict[str, Any]:
            return {}

        def run(self) -> int:
            return 3

    runner = Runner("envA", [NodeSpec("Loose", Loose, None)])
    outputs = values((abi.VALUE_NONE, None))
    status = runner.builder.node_set.classes[0].execute(fake.ctx, values(), outputs)
    assert status == abi.NODE_ERROR
    assert fake.failures == [("TypeError", "run returned int; a node returns a tuple, or a "
                                           "dict with 'result'")]
