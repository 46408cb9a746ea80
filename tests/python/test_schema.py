"""A V1 class as the worker reads it (worker/_schema.py): INPUT_TYPES, RETURN_TYPES and the
class flags become the node ABI's fields and schema_json, as ComfyUI reads the same class."""

from __future__ import annotations

import ctypes
import json
from typing import Any

import pytest

from comfy_orch._shared import abi
from comfy_orch.worker._schema import NodeSetBuilder, NodeSpec


class Blur:
    """A pack's class, as ComfyUI's docs write one."""

    DESCRIPTION = "Blurs an image."
    RETURN_TYPES = ("IMAGE", "INT")
    RETURN_NAMES = ("image", "radius")
    FUNCTION = "blur"
    CATEGORY = "image/filters"
    OUTPUT_NODE = True

    @classmethod
    def INPUT_TYPES(cls) -> dict[str, Any]:
        return {"required": {"image": ("IMAGE",),
                             "radius": ("INT", {"default": 3, "min": 1, "max": 31, "step": 2}),
                             "mode": (["gauss", "box"], {"tooltip": "kernel"}),
                             "strength": ("FLOAT", {"default": 0.5})},
                "optional": {"mask": ("MASK",), "note": ("STRING", {"default": "x"})},
                "hidden": {"uid": "UNIQUE_ID", "prompt": "PROMPT"}}

    @classmethod
    def VALIDATE_INPUTS(cls, radius: int, input_types: Any = None) -> bool:
        return radius % 2 == 1

    def blur(self, **kwargs: Any) -> tuple[Any, ...]:
        return (kwargs["image"], kwargs["radius"])


def test_inputs_keep_their_order_type_requirement_and_options() -> None:
    spec = NodeSpec("Blur", Blur, "Blur (box)")
    assert [(i.name, i.type, i.required) for i in spec.inputs] == [
        ("image", "IMAGE", True), ("radius", "INT", True), ("mode", "COMBO", True),
        ("strength", "FLOAT", True), ("mask", "MASK", False), ("note", "STRING", False)]
    radius = spec.inputs[1]
    assert radius.options == {"default": 3, "min": 1, "max": 31, "step": 2}
    assert spec.inputs[2].choices == ["gauss", "box"]
    assert spec.inputs[2].extras() == {"tooltip": "kernel", "options": ["gauss", "box"]}


def test_class_attributes_become_the_specs_fields() -> None:
    spec = NodeSpec("Blur", Blur, None)
    assert spec.display_name == "Blur"
    assert spec.return_types == ["IMAGE", "INT"]
    assert spec.function == "blur"
    assert spec.category == "image/filters"
    assert spec.output_node and not spec.not_idempotent and not spec.input_is_list
    assert spec.hidden == {"uid": "UNIQUE_ID", "prompt": "PROMPT"}
    assert spec.validate is not None and spec.fingerprint is None


def test_a_combo_declared_with_options_is_a_combo_with_those_choices() -> None:
    class Picker:
        RETURN_TYPES = ()
        FUNCTION = "run"

        @classmethod
        def INPUT_TYPES(cls) -> dict[str, Any]:
            return {"required": {"size": ("COMBO", {"options": [512, 768]})}}

        def run(self) -> tuple[()]:
            return ()

    (size,) = NodeSpec("Picker", Picker, None).inputs
    assert (size.type, size.choices) == ("COMBO", ["512", "768"])


def test_a_function_that_names_no_method_is_refused_naming_it() -> None:
    class Broken:
        RETURN_TYPES = ()
        FUNCTION = "missing"

        @classmethod
        def INPUT_TYPES(cls) -> dict[str, Any]:
            return {}

    with pytest.raises(TypeError, match="FUNCTION 'missing' names no method"):
        NodeSpec("Broken", Broken, None)


def test_input_types_that_is_not_a_dict_is_refused() -> None:
    class Odd:
        FUNCTION = "run"

        @classmethod
        def INPUT_TYPES(cls) -> list[str]:
            return []

        def run(self) -> tuple[()]:
            return ()

    with pytest.raises(TypeError, match="returned list, not a dict"):
        NodeSpec("Odd", Odd, None)


def test_validate_args_says_what_validate_inputs_takes_as_comfyui_reads_it() -> None:
    assert NodeSpec("Blur", Blur, None).validate_args() == {
        "inputs": ["cls", "radius"], "all_inputs": False, "input_types": True}


def test_schema_json_carries_what_the_abi_fields_cannot() -> None:
    schema = json.loads(NodeSpec("Blur", Blur, "Blur (box)").schema_json())
    assert schema["inputs"]["mode"]["options"] == ["gauss", "box"]
    assert schema["return_names"] == ["image", "radius"]
    assert schema["description"] == "Blurs an image."
    assert schema["validate_inputs"]["input_types"] is True
    info = json.loads(schema["node_info_text"])
    assert info["display_name"] == "Blur (box)"
    assert info["input_order"]["required"] == ["image", "radius", "mode", "strength"]
    assert info["output_node"] is True and info["category"] == "image/filters"


def test_each_node_id_keeps_its_own_instance() -> None:
    spec = NodeSpec("Blur", Blur, None)
    assert spec.call("1", {"image": "i", "radius": 5}) == ("i", 5)
    spec.call("2", {"image": "j", "radius": 7})
    first = spec.instances["1"]
    spec.call("1", {"image": "k", "radius": 9})
    assert spec.instances["1"] is first and spec.instances["2"] is not first


def test_the_node_set_holds_flags_ranges_and_required_defaults() -> None:
    names: list[tuple[str, str]] = []

    def callback(spec: NodeSpec, method: str) -> Any:
        names.append((spec.class_type, method))
        return lambda ctx, inputs, outputs: abi.NODE_OK

    builder = NodeSetBuilder([NodeSpec("Blur", Blur, "Blur (box)")], callback)
    node_set = builder.node_set
    assert (node_set.struct_size, node_set.abi_major, node_set.count) == (
        ctypes.sizeof(abi.NodeSet), abi.NODES_ABI_MAJOR, 1)
    c = node_set.classes[0]
    assert (c.class_type, c.display_name, c.category) == (b"Blur", b"Blur (box)",
                                                           b"image/filters")
    assert c.flags == abi.NODE_OUTPUT_NODE
    assert [c.outputs[k] for k in range(c.output_count)] == [b"IMAGE", b"INT"]
    assert names == [("Blur", "execute"), ("Blur", "validate")]  # no IS_CHANGED
    radius, note = c.inputs[1], c.inputs[5]
    assert radius.flags == (abi.INPUT_REQUIRED | abi.INPUT_HAS_MIN | abi.INPUT_HAS_MAX
                            | abi.INPUT_HAS_DEFAULT)
    assert (radius.min, radius.max) == (1.0, 31.0)
    assert (radius.default_value.kind, radius.default_value.i) == (abi.VALUE_INT, 3)
    # An optional input's default is the method's own: ComfyUI does not pass it.
    assert note.flags == 0 and note.default_value.kind == abi.VALUE_NONE
