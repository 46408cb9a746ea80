"""What node code may call during its node's call (`import comfy_orch`, docs/python.md), over
the fake worker API, and what it says outside a call."""

from __future__ import annotations

import numpy as np
import pytest

import comfy_orch
from comfy_orch.worker import _call
from fake_worker import FakeWorker


def test_outside_a_call_each_call_says_it_needs_one() -> None:
    assert _call.current is None
    with pytest.raises(RuntimeError, match=r"comfy_orch\.progress is only available inside"):
        comfy_orch.progress(1, 2)
    with pytest.raises(RuntimeError, match=r"comfy_orch\.node_id is only available inside"):
        comfy_orch.node_id()


def test_progress_and_node_id_reach_the_worker(worker: FakeWorker) -> None:
    comfy_orch.progress(3.9, 10)
    assert worker.progress == [(3, 10)]
    assert comfy_orch.node_id() == "7"


def test_check_interrupted_raises_once_the_prompt_is_interrupted(worker: FakeWorker) -> None:
    comfy_orch.check_interrupted()
    worker.interrupt = True
    assert comfy_orch.interrupted()
    with pytest.raises(comfy_orch.Interrupted, match="interrupted"):
        comfy_orch.check_interrupted()


def test_empty_is_a_pool_tensor_that_returns_without_a_copy(worker: FakeWorker) -> None:
    image = comfy_orch.empty((1, 4, 4, 3))
    assert isinstance(image, np.ndarray) and image.dtype == np.float32
    image[...] = 0.5
    (buffer,) = worker.buffers
    assert buffer.ctypes.data == image.ctypes.data and float(buffer.sum()) == 24.0
    call = _call.require("test")
    assert call.pool_tensor_of(image) is call.allocated[0]
    image.shape = (4, 4, 3)  # reshaped in place: no longer the bytes it was handed out as
    assert call.pool_tensor_of(image) is None


def test_register_model_says_whether_it_created_the_model(worker: FakeWorker) -> None:
    model = comfy_orch.register_model("unet", 1 << 20)
    assert (model.name, model.created) == ("unet", True)
    assert not comfy_orch.register_model("unet", 1 << 20).created
    assert worker.regions == {"unet": 1 << 20}
    model.fault(0, 4096)
    model.unpin(0, 4096)


def test_cast_buffer_gives_the_workers_address(worker: FakeWorker) -> None:
    assert comfy_orch.cast_buffer(1, 1024) == 8192


def test_an_oom_status_is_a_memory_error_to_retry(worker: FakeWorker) -> None:
    call = _call.require("test")
    with pytest.raises(MemoryError, match="pinned_reserve: out of memory"):
        call.status("pinned_reserve", 1)
    with pytest.raises(RuntimeError, match="failed with orch_status 5"):
        call.status("pinned_reserve", 5)


def test_hidden_values_come_from_the_call(worker: FakeWorker) -> None:
    worker.hidden["PROMPT"] = '{"7": {"class_type": "Blur"}}'
    call = _call.require("test")
    assert call.hidden("UNIQUE_ID") == "7"
    assert call.hidden("PROMPT") == {"7": {"class_type": "Blur"}}
    assert call.hidden("EXTRA_PNGINFO") is None
    assert call.hidden("DYNPROMPT").get_node("7") == {"class_type": "Blur"}
