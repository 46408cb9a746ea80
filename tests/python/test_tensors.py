"""Tensors over pool memory (_shared/tensors.py): numpy views of an orch_tensor's bytes, the
dtypes that cross, and how a returned tensor is known to be the very bytes it came in."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from comfy_orch._shared import abi, tensor_kind, tensors


def tensor_over(array: npt.NDArray[Any]) -> abi.Tensor:
    t = abi.Tensor()
    t.dtype, t.ndim, t.data = tensors.dtype_code(array.dtype), array.ndim, array.ctypes.data
    for i, n in enumerate(array.shape):
        t.shape[i] = n
    return t


def test_a_view_shares_the_bytes_it_describes() -> None:
    backing = np.zeros((2, 3), np.uint8)
    view = tensors.array_of(tensor_over(backing))
    view[1, 2] = 9
    assert backing[1, 2] == 9 and view.shape == (2, 3) and view.dtype == np.uint8


def test_an_empty_tensor_is_an_empty_array() -> None:
    t = abi.Tensor()
    t.dtype, t.ndim = abi.DTYPE_I64, 1
    assert tensors.array_of(t).shape == (0,)


def test_only_float32_uint8_and_int64_cross() -> None:
    assert [tensors.dtype_code(d) for d in ("float32", "uint8", "int64")] == [
        abi.DTYPE_F32, abi.DTYPE_U8, abi.DTYPE_I64]
    with pytest.raises(TypeError, match="float16 cannot cross.*float32, uint8 or int64"):
        tensors.dtype_code(np.float16)


def test_same_bytes_needs_the_address_shape_and_dtype() -> None:
    backing = np.zeros((4, 4), np.float32)
    t = tensor_over(backing)
    assert tensors.same_bytes(backing, t)
    assert not tensors.same_bytes(backing.reshape(16), t)
    assert not tensors.same_bytes(backing.T, t)  # not contiguous
    assert not tensors.same_bytes(backing.view(np.int32), t)
    assert tensors.still_over(backing, t) and not tensors.still_over(backing[1:], t)


def test_the_tensor_library_follows_the_pack_or_the_override(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMFY_ORCH_TENSORS", "torch")
    assert tensor_kind.use_torch()
    monkeypatch.setenv("COMFY_ORCH_TENSORS", "numpy")
    assert not tensor_kind.use_torch()
    assert tensors.as_array([1, 2]) is None


def test_a_tensor_is_known_without_importing_its_library() -> None:
    import torch

    assert tensor_kind.is_tensor(np.zeros(2))
    assert tensor_kind.is_tensor(torch.zeros(2))
    assert not tensor_kind.is_tensor([1, 2])
    assert not tensor_kind.is_tensor(np.float32(1.0))  # a scalar crosses as its value


def test_an_env_without_numpy_is_told_to_add_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import comfy_orch._shared

    monkeypatch.delitem(sys.modules, "comfy_orch._shared.tensors")
    monkeypatch.delattr(comfy_orch._shared, "tensors")
    monkeypatch.setitem(sys.modules, "numpy", None)  # what an env without numpy imports
    with pytest.raises(ModuleNotFoundError, match="add numpy to the pack's dependencies"):
        tensor_kind.load_tensors()
