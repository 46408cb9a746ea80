"""Values between the worker runtime and node code (worker/_values.py): plain values by value,
containers as LIST and DICT, tuples marked, tensors in the pool, and every other object as a
handle that stays in its worker."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from comfy_orch._shared import abi, serializers
from comfy_orch.worker import _call
from comfy_orch.worker._values import HANDLE_PREFIX, Handles, from_value, to_value
from fake_worker import FakeWorker


def round_trip(obj: Any, handles: Handles | None = None, declared: str = "*") -> Any:
    handles = handles or Handles("envA")
    call = _call.require("test")
    out = abi.Value()
    to_value(obj, out, call, handles)
    return from_value(out, declared, handles, "node 7 (Test)", False)


@pytest.mark.parametrize("value", [None, True, False, 0, -5, 2**62, 1.5, "", "text ü"])
def test_plain_values_cross_as_they_are(worker: FakeWorker, value: object) -> None:
    back = round_trip(value)
    assert back == value and type(back) is type(value)


def test_lists_and_dicts_nest_and_keep_their_items(worker: FakeWorker) -> None:
    value = {"samples": [1, 2.5, "x"], "meta": {"ok": True, "n": None}}
    assert round_trip(value) == value
    assert round_trip([]) == [] and round_trip({}) == {}


def test_a_tuple_comes_back_as_a_tuple(worker: FakeWorker) -> None:
    assert round_trip((512, 768)) == (512, 768)
    assert round_trip([(1, 2), {"size": (3,)}]) == [(1, 2), {"size": (3,)}]


def test_a_numpy_scalar_is_its_python_value(worker: FakeWorker) -> None:
    back = round_trip(np.float32(0.25))
    assert back == 0.25 and type(back) is float


def test_an_int_past_64_bits_stays_in_its_worker_as_a_handle(worker: FakeWorker) -> None:
    handles = Handles("envA")
    assert round_trip(2**64, handles) == 2**64
    assert len(handles.objects) == 1


def test_nesting_past_the_abis_depth_is_a_clear_error(worker: FakeWorker) -> None:
    value: Any = 1
    for _ in range(abi.MAX_VALUE_DEPTH + 1):
        value = [value]
    with pytest.raises(ValueError, match="deeper than 5 levels"):
        round_trip(value)
    deepest: Any = 1
    for _ in range(abi.MAX_VALUE_DEPTH):
        deepest = [deepest]
    assert round_trip(deepest) == deepest


class Model:
    """A pack's object that cannot cross: a model, a CLIP."""


def test_an_object_stays_in_its_worker_and_comes_back_as_itself(worker: FakeWorker) -> None:
    handles = Handles("envA")
    model = Model()
    out = abi.Value()
    to_value(model, out, _call.require("test"), handles)
    assert out.kind == abi.VALUE_STRING and out.s is not None
    text = out.s.decode()
    assert text.startswith(HANDLE_PREFIX + "envA:") and text.endswith(":Model")
    assert from_value(out, "MODEL", handles, "node", False) is model
    # A STRING input takes the handle's text, never the object.
    assert from_value(out, "STRING", handles, "node", False) == text


def test_another_envs_object_is_refused_naming_both_envs(worker: FakeWorker) -> None:
    made = Handles("envA")
    key = made.put(object())
    with pytest.raises(TypeError, match="made in env 'envA' cannot be used in env 'envB'"):
        Handles("envB").get(key, "node 3 (Sampler)")
    with pytest.raises(LookupError, match="is gone"):
        Handles("envA").get(key, "node 3 (Sampler)")  # a restarted worker's own handle
    with pytest.raises(ValueError, match="malformed object handle"):
        made.get(HANDLE_PREFIX + "envA", "node")


def test_a_registered_type_crosses_as_its_payload(worker: FakeWorker,
                                                 no_serializers: None) -> None:
    class Box:
        def __init__(self, size: int) -> None:
            self.size = size

    serializers.register("Box", lambda box, recurse: {"size": box.size},
                         lambda payload, recurse: Box(payload["size"]))
    back = round_trip({"box": Box(3)})
    assert isinstance(back["box"], Box) and back["box"].size == 3


def test_a_tensor_output_is_written_into_the_pool_once(worker: FakeWorker) -> None:
    image = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = abi.Value()
    to_value(image, out, _call.require("test"), Handles("envA"))
    assert out.kind == abi.VALUE_TENSOR
    assert (out.tensor.ndim, list(out.tensor.shape)[:3]) == (3, [2, 3, 4])
    (buffer,) = worker.buffers
    assert np.array_equal(buffer, image) and out.tensor.data == buffer.ctypes.data


def test_a_tensor_input_is_a_view_and_passing_it_through_copies_nothing(
        worker: FakeWorker) -> None:
    call = _call.require("test")
    produced = call.new_tensor((2, 2), np.float32)
    view = from_value(_tensor_value(produced), "IMAGE", Handles("envA"), "node", False)
    view[...] = 7.0
    assert np.array_equal(worker.buffers[0], np.full((2, 2), 7.0, np.float32))
    out = abi.Value()
    to_value(view, out, call, Handles("envA"))
    assert out.tensor.data == produced.data and len(worker.buffers) == 1


def test_a_numpy_array_of_a_dtype_the_pool_lacks_stays_in_its_worker(worker: FakeWorker) -> None:
    handles = Handles("envA")
    vertices = np.zeros((3, 3))  # float64, as a mesh pack's are
    assert round_trip(vertices, handles) is vertices
    assert len(handles.objects) == 1 and not worker.buffers


def test_a_numpy_array_comes_back_as_numpy_where_node_code_gets_torch(
        worker: FakeWorker) -> None:
    boxes = np.ones((2, 2, 3), np.float32)
    call = _call.require("test")
    out = abi.Value()
    to_value(boxes, out, call, Handles("envA"))
    assert out.kind == abi.VALUE_TENSOR  # node code gets numpy here: it is its tensor
    call.torch_tensors = True
    to_value({"bboxes": boxes, "num_parts": 2}, out, call, Handles("envA"))
    back = from_value(out, "*", Handles("envA"), "node 7 (Test)", False)
    assert type(back["bboxes"]) is np.ndarray and np.array_equal(back["bboxes"], boxes)
    assert serializers.decode({serializers.NDARRAY: boxes}) is boxes


def _tensor_value(t: abi.Tensor) -> abi.Value:
    v = abi.Value()
    v.kind, v.tensor = abi.VALUE_TENSOR, t
    return v


def test_the_dynamic_inputs_dict_is_its_items_never_one_value(worker: FakeWorker) -> None:
    # A prompt names dynamic inputs as it likes: names that are marks stay plain names.
    from comfy_orch.worker._values import items_of
    call = _call.require("test")
    out = abi.Value()
    given = {serializers.PICKLE: "x.Y", "data": [1, 2], serializers.TUPLE: "t"}
    to_value(given, out, call, Handles("envA"))
    assert items_of(out, Handles("envA"), "node 7 (Test)", False) == given
