"""Worker models as stand-ins in ComfyUI's current_loaded_models (comfyui/_stand_ins.py), with
a fake host and a fake comfy.model_management: what ComfyUI's memory manager reads of them, and
how its evictions reach the workers."""

from __future__ import annotations

import weakref
from types import SimpleNamespace
from typing import Any, cast

import pytest

from comfy_orch.comfyui._stand_ins import SURFACE, StandIn, StandIns
from comfy_orch.host import Host, HostError


class FakeHost:
    """The host's models and evictions, as liborch_host.so reports them."""

    def __init__(self) -> None:
        self.models_now: list[dict[str, Any]] = []
        self.evictions: list[tuple[str, int, int]] = []
        self.receipt: dict[str, Any] | Exception = {}

    def models(self) -> list[dict[str, Any]]:
        return self.models_now

    def evict(self, env: str, generation: int, nbytes: int) -> dict[str, Any]:
        self.evictions.append((env, generation, nbytes))
        if isinstance(self.receipt, Exception):
            raise self.receipt
        return self.receipt


class LoadedModel:
    """ComfyUI's LoadedModel, as far as the stand-ins use it."""

    def __init__(self, model: Any) -> None:
        self.model = model


def as_host(fake: FakeHost) -> Host:
    return cast(Host, fake)  # the members StandIn and StandIns call


def management() -> Any:
    return SimpleNamespace(current_loaded_models=[], LoadedModel=LoadedModel,
                           cleanup_models=lambda: None)


def model(key: str, resident: int, generation: int = 1, size: int = 100) -> dict[str, Any]:
    return {"env": "envA", "key": key, "generation": generation, "size": size,
            "resident": resident}


def test_a_stand_in_has_every_member_comfyui_touches_and_nothing_else() -> None:
    s = StandIn(as_host(FakeHost()), "envA", "unet", 1, 100, 60, "cuda:0")
    for name in SURFACE:
        assert hasattr(s, name), name
    assert (s.model_size(), s.loaded_size(), s.current_loaded_device()) == (100, 60, "cuda:0")
    assert not s.is_dynamic() and s.model_patches_models() == []
    with pytest.raises(AttributeError, match="outside the declared surface"):
        s.patch_model  # noqa: B018 - the read is the test


def test_a_new_resident_model_goes_in_first_and_a_gone_one_leaves() -> None:
    host, mm = FakeHost(), management()
    stand_ins = StandIns(as_host(host), mm, "cuda:0")
    mm.current_loaded_models.append(LoadedModel("host model"))
    host.models_now = [model("unet", 50), model("vae", 0)]
    stand_ins.sync()
    assert [m.model.key for m in mm.current_loaded_models[:1]] == ["unet"]
    assert len(mm.current_loaded_models) == 2  # the evicted vae is not loaded
    loaded = mm.current_loaded_models[0]
    assert loaded.currently_used is False
    assert isinstance(loaded.real_model, weakref.ref) and loaded.real_model() is not None
    host.models_now = []
    stand_ins.sync()
    assert [m.model for m in mm.current_loaded_models] == ["host model"]


def test_a_replaced_worker_generation_is_a_new_stand_in() -> None:
    host, mm = FakeHost(), management()
    stand_ins = StandIns(as_host(host), mm, "cpu")
    host.models_now = [model("unet", 50, generation=1)]
    stand_ins.sync()
    first = mm.current_loaded_models[0].model
    host.models_now = [model("unet", 70, generation=2)]
    stand_ins.sync()
    (entry,) = mm.current_loaded_models
    assert entry.model is not first and entry.model.generation == 2
    assert first.gone == "its worker was replaced"
    assert not first.is_clone(entry.model)


def test_an_eviction_counts_what_the_workers_receipt_says() -> None:
    host = FakeHost()
    s = StandIn(as_host(host), "envA", "unet", 3, 100, 80, "cpu")
    host.receipt = {"freed": 30, "models": [{"key": "unet", "resident": 50}]}
    assert s.partially_unload("cpu", 30) == 30
    assert host.evictions == [("envA", 3, 30)] and s.loaded_size() == 50
    host.receipt = {"freed": 50, "models": [{"key": "unet", "resident": 0}]}
    s.detach()
    assert host.evictions[-1] == ("envA", 3, 50) and s.loaded_size() == 0
    assert s.partially_unload("cpu", 10) == 0 and len(host.evictions) == 2


def test_a_dead_worker_counts_as_offloaded_and_a_load_then_names_the_model() -> None:
    host = FakeHost()
    s = StandIn(as_host(host), "envA", "unet", 1, 100, 80, "cpu")
    host.receipt = HostError("worker_died", "the worker died")
    assert s.partially_unload("cpu", 10) == 80 and s.loaded_size() == 0
    with pytest.raises(RuntimeError, match="model unet of env envA is no longer available"):
        s.partially_load("cpu", 0)


def test_an_eviction_that_fails_otherwise_frees_nothing_and_never_raises() -> None:
    host = FakeHost()
    s = StandIn(as_host(host), "envA", "unet", 1, 100, 80, "cpu")
    host.receipt = HostError("deadline_exceeded", "busy")
    assert s.partially_unload("cpu", 10) == 0
    assert s.loaded_size() == 80 and s.gone is None
