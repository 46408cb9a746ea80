"""What crosses when a node of another env takes a worker's object (worker/_crossing.py), with
no worker: a registered serializer's payload, else a pickle, else a refusal that names both
envs and the fix."""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np
import pytest

from comfy_orch._shared import serializers
from comfy_orch.worker import _crossing


class _Registered:
    def __init__(self, n: int) -> None:
        self.n = n


def test_a_registered_type_crosses_as_its_serializers_payload() -> None:
    serializers.register("_Registered", lambda obj, recurse: {"n": obj.n},
                         lambda payload, recurse: _Registered(payload["n"]))
    marked = _crossing.export(_Registered(4), "env-a")
    assert marked == {serializers.MARK: "_Registered", "payload": {"n": 4}}
    assert not _crossing.is_crossing(marked)


def test_anything_else_crosses_as_its_pickle_and_is_rebuilt_where_its_type_imports() -> None:
    crossing = _crossing.export(types.SimpleNamespace(vertices=[1, 2]), "env-a")
    assert _crossing.is_crossing(crossing)
    assert crossing[_crossing.MARK] == "types.SimpleNamespace"
    assert crossing["data"].dtype == np.uint8  # crosses as a pool tensor
    again = _crossing.load(crossing, "env-b", "node 3")
    assert again == types.SimpleNamespace(vertices=[1, 2])


def test_an_object_that_cannot_be_pickled_is_refused_with_the_fix() -> None:
    with pytest.raises(TypeError, match=r"a types.SimpleNamespace of env 'env-a' cannot cross "
                                        r"to another env: it cannot be pickled .*"
                                        r"register_serializer"):
        _crossing.export(types.SimpleNamespace(f=lambda: 1), "env-a")


def test_a_pickle_over_the_cap_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCH_PICKLE_MAX_BYTES", "16")
    with pytest.raises(ValueError, match="over ORCH_PICKLE_MAX_BYTES"):
        _crossing.export(types.SimpleNamespace(blob="x" * 64), "env-a")


def test_a_type_the_receiving_env_cannot_import_names_both_envs_and_the_fix() -> None:
    module = types.ModuleType("orch_only_in_env_a")
    exec("class Mesh:\n    pass\n", module.__dict__)
    sys.modules["orch_only_in_env_a"] = module
    try:
        crossing = _crossing.export(module.Mesh(), "env-a")
    finally:
        del sys.modules["orch_only_in_env_a"]
    with pytest.raises(TypeError) as refused:
        _crossing.load(crossing, "env-b", "node 7")
    said = str(refused.value)
    assert said.startswith("node 7: a orch_only_in_env_a.Mesh made in env 'env-a' cannot be "
                           "used in env 'env-b': this env cannot import its type")
    assert "add the package that defines it to env 'env-b''s dependencies" in said


def test_a_crossing_without_its_pickle_is_refused() -> None:
    bad: dict[str, Any] = {_crossing.MARK: "x.Y", "env": "env-a", "data": None}
    with pytest.raises(TypeError, match="without its pickle"):
        _crossing.load(bad, "env-b", "node 1")


def test_a_model_of_comfyuis_process_is_refused_before_it_is_pickled() -> None:
    torch = pytest.importorskip("torch")
    from comfy_orch.comfyui import _handover

    class Patcher:  # ComfyUI's ModelPatcher holds its torch module as .model
        def __init__(self) -> None:
            self.model = torch.nn.Linear(2, 2)

    for model in (torch.nn.Linear(2, 2), Patcher()):
        with pytest.raises(TypeError, match="models do not move between processes"):
            _handover.pickled(model, "env-b")


def test_a_pickle_is_refused_while_it_is_written_past_the_cap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCH_PICKLE_MAX_BYTES", "1000")
    with pytest.raises(serializers.PickleTooLarge):
        serializers.capped_pickle(["x" * 600, "y" * 600])
    assert len(serializers.capped_pickle("x" * 100)) < 1000
