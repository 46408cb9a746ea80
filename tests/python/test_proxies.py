"""ComfyUI V1 classes that stand for a worker's classes (comfyui/_proxies.py), built from the
schema its worker reported and called through a fake host: what ComfyUI reads of them, and one
call of each kind."""

from __future__ import annotations

import inspect
from typing import Any, cast

import pytest

from comfy_orch._shared.serializers import HANDLE_PREFIX, TUPLE
from comfy_orch.comfyui import _proxies
from comfy_orch.comfyui._proxies import WorkerObject, build_proxy, outputs_of
from comfy_orch.host import Host, NodeError, NodeResult

SCHEMA: dict[str, Any] = {
    "env": "envA", "function": "blur", "outputs": ["IMAGE", "MODEL"],
    "return_names": ["image", "model"], "category": "image", "display_name": "Blur",
    "inputs": [{"name": "image", "type": "IMAGE", "required": True},
               {"name": "radius", "type": "INT", "required": True, "default": 3, "min": 1},
               {"name": "mode", "type": "COMBO", "options": ["a", "b"], "required": False}],
    "hidden": {"uid": "UNIQUE_ID"}, "has_is_changed": True, "has_validate_inputs": True,
    "validate_inputs": {"inputs": ["radius"], "all_inputs": False, "input_types": False}}


class FakeHost:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.result = NodeResult([], None)
        self.error: NodeError | None = None
        self.prompts = 0

    def execute(self, class_type: str, inputs: dict[str, Any], node: str = "1",
                hidden: dict[str, Any] | None = None, method: str | None = None) -> NodeResult:
        self.calls.append({"class_type": class_type, "inputs": inputs, "node": node,
                           "hidden": hidden, "method": method})
        if self.error is not None:
            raise self.error
        return self.result

    def begin_prompt(self) -> int:
        self.prompts += 1
        return self.prompts

    def interrupt(self) -> None:
        pass


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> FakeHost:
    # A ComfyUI without executing contexts: the proxies ask for the node id and prompt.
    monkeypatch.setattr(_proxies, "executing_context_reader", lambda: None)
    return FakeHost()


def proxy(host: FakeHost) -> Any:
    return build_proxy(cast(Host, host), "Blur", SCHEMA)


def test_input_types_come_from_the_schema_with_the_hidden_values_it_needs(
        host: FakeHost) -> None:
    types = proxy(host).INPUT_TYPES()
    assert types["required"] == {"image": ("IMAGE",), "radius": ("INT", {"default": 3, "min": 1})}
    assert types["optional"] == {"mode": (["a", "b"], {})}
    assert types["hidden"] == {"uid": "UNIQUE_ID", "orch_unique_id": "UNIQUE_ID",
                               "orch_prompt": "PROMPT", "orch_extra_pnginfo": "EXTRA_PNGINFO"}


def test_the_class_declares_what_the_packs_class_declares(host: FakeHost) -> None:
    cls = proxy(host)
    assert (cls.RETURN_TYPES, cls.RETURN_NAMES, cls.FUNCTION, cls.CATEGORY) == (
        ("IMAGE", "MODEL"), ("image", "model"), "blur", "image")
    assert cls.COMFY_ORCH_ENV == "envA" and cls.__name__ == "Blur"
    assert inspect.getfullargspec(cls.VALIDATE_INPUTS).args == ["cls", "radius"]


def test_a_call_runs_in_the_worker_and_its_objects_come_back_as_handles(
        host: FakeHost) -> None:
    handle = HANDLE_PREFIX + "envA:10:1:Unet"
    host.result = NodeResult([[1.0], handle], {"images": ["x.png"]})
    prompt: dict[str, Any] = {"3": {}}
    returned = getattr(proxy(host)(), "blur")(image=[1.0], radius=5, size=(2, 3), uid="3",
                                              orch_prompt=prompt)
    (call,) = host.calls
    assert call["inputs"] == {"image": [1.0], "radius": 5, "size": {TUPLE: [2, 3]}}
    assert (call["node"], call["hidden"], call["method"]) == ("3", None, None)
    assert host.prompts == 1
    image, model = returned["result"]
    assert image == [1.0] and returned["ui"] == {"images": ["x.png"]}
    assert isinstance(model, WorkerObject) and model.handle == handle
    with pytest.raises(TypeError, match="this MODEL lives in the worker of env envA"):
        model.state_dict  # noqa: B018 - the read is the test


def test_validation_goes_to_the_worker_and_its_refusal_is_the_text(host: FakeHost) -> None:
    cls = proxy(host)
    assert cls.VALIDATE_INPUTS(radius=3) is True
    host.error = NodeError({"type": "custom_validation_failed", "message": "radius is even"})
    assert cls.VALIDATE_INPUTS(radius=4) == "radius is even"
    assert [c["method"] for c in host.calls] == ["VALIDATE_INPUTS", "VALIDATE_INPUTS"]
    assert host.prompts == 0  # no prompt began


def test_is_changed_is_the_workers_change_key(host: FakeHost) -> None:
    host.result = NodeResult(["key-1"], None)
    assert proxy(host).IS_CHANGED(radius=3) == "key-1"


def test_outputs_past_the_results_are_none_and_strings_stay_strings() -> None:
    schema = {"env": "e", "outputs": ["STRING", "INT"]}
    assert outputs_of(schema, [HANDLE_PREFIX + "x"]) == (HANDLE_PREFIX + "x", None)
