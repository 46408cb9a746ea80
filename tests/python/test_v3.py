"""ComfyUI V3 classes as the worker reads them (worker/_v3.py), against a stand-in of
comfy_api's io.ComfyNode: told apart by their base, their schema in the V1 spec's fields."""

from __future__ import annotations

from types import ModuleType, SimpleNamespace
from typing import Any

from comfy_orch.worker._schema import NodeSpec
from comfy_orch.worker._v3 import V3Spec, entrypoint_classes, is_v3


class ComfyNode:
    """comfy_api's base, as an older comfy_api (without comfy_api.internal) has it."""


ComfyNode.__module__ = "comfy_api.latest._io"


class Widget:
    def __init__(self, id: str, io_type: str, **options: Any) -> None:
        self.id, self.io_type = id, io_type
        for key, value in options.items():
            setattr(self, key, value)


class Sharpen(ComfyNode):
    @classmethod
    def define_schema(cls) -> Any:
        return SimpleNamespace(
            node_id="Sharpen", display_name="Sharpen!", category="image",
            inputs=[Widget("image", "IMAGE"), Widget("amount", "FLOAT", default=0.5, max=2.0),
                    Widget("mode", "COMBO", options=["fast", "fine"], optional=True)],
            outputs=[Widget("out", "IMAGE", display_name="sharpened")],
            hidden=[SimpleNamespace(value="UNIQUE_ID")], is_output_node=True)

    @classmethod
    def execute(cls, image: Any, amount: float, mode: str = "fast") -> Any:
        return SimpleNamespace(args=(image * 2,), ui={"text": [mode]})


def test_v3_classes_are_told_apart_by_their_base() -> None:
    assert is_v3(Sharpen)
    assert not is_v3(ComfyNode) and not is_v3(object) and not is_v3("Sharpen")


def test_the_schema_becomes_the_v1_specs_fields() -> None:
    spec = V3Spec(None, Sharpen)
    assert isinstance(spec, NodeSpec)
    assert (spec.class_type, spec.display_name, spec.category) == ("Sharpen", "Sharpen!", "image")
    assert [(i.name, i.type, i.required) for i in spec.inputs] == [
        ("image", "IMAGE", True), ("amount", "FLOAT", True), ("mode", "COMBO", False)]
    assert spec.inputs[1].options == {"default": 0.5, "max": 2.0}
    assert spec.inputs[2].choices == ["fast", "fine"]
    assert (spec.return_types, spec.return_names) == (["IMAGE"], ["sharpened"])
    assert spec.hidden == {"unique_id": "UNIQUE_ID"} and spec.output_node
    assert spec.validate is None and spec.fingerprint is None
    assert spec.schema()["api_version"] == 3


def test_execute_returns_a_v1_shaped_result() -> None:
    spec = V3Spec("Sharpen", Sharpen)
    assert spec.call("1", {"image": 2, "amount": 1.0}) == {"result": (4,),
                                                            "ui": {"text": ["fast"]}}


def test_an_entrypoints_node_list_is_read_awaiting_what_is_async() -> None:
    loaded: list[str] = []

    class Extension:
        async def on_load(self) -> None:
            loaded.append("on_load")

        async def get_node_list(self) -> list[type]:
            return [Sharpen]

    pack = ModuleType("pack")
    assert entrypoint_classes(pack) == []
    setattr(pack, "comfy_entrypoint", Extension)
    assert entrypoint_classes(pack) == [Sharpen]
    assert loaded == ["on_load"]
