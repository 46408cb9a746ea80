"""Every worker model as a stand-in in ComfyUI's comfy.model_management.current_loaded_models
(docs/comfyui.md, "Memory"), so ComfyUI's own free_memory, its Free button and unload_all_models
evict worker models, each eviction counted from the worker's measured receipt.

A stand-in is a duck type with exactly the members model_management touches (SURFACE), not a
ModelPatcher subclass: a subclass would inherit a hundred members that are silently wrong for a
model in another process (docs/references.md, comfy-env §3.7). Rules it keeps:
- eviction (partially_unload, detach) never raises: it runs inside ComfyUI's free_memory. A
  worker that died or was replaced answers "already offloaded": everything it held is gone; any
  other failure (a worker busy past the call's deadline) frees nothing, as far as ComfyUI knows;
- a load through a dead worker raises, naming the model and what to do;
- current_loaded_models changes only at a node boundary (sync, after a proxy call), never from
  an event: ComfyUI's free_memory pops entries by the indexes it sorted, and a list changed under
  it (a worker restarting mid-loop) would pop the wrong ones.

ComfyUI's model_management, its devices and its LoadedModel are not type-checked here: Any."""

from __future__ import annotations

import logging
import threading
import uuid
import weakref
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..host import Host

_log = logging.getLogger("comfy_orch")

# The members ComfyUI's model_management reads or calls on an entry's model (LoadedModel,
# free_memory, load_models_gpu, cleanup_models, models_for_pin_eviction at the commit the
# harness follows).
SURFACE = ("load_device", "offload_device", "parent", "model", "model_size", "loaded_size",
           "current_loaded_device", "model_dtype", "model_patches_to", "model_patches_models",
           "get_nested_additional_models", "lowvram_patch_counter", "is_dynamic", "is_clone",
           "partially_load", "partially_unload", "detach", "clone_base_uuid")


# Errors of an eviction after which the model is known to be gone from the device: the worker
# was replaced, died (its channel lost), is not running, or the host stopped (host.py, the
# errc headers). A deadline_exceeded is not among them: the worker may still hold the model.
_GONE = frozenset(("stale_generation", "not_ready", "worker_died", "peer_lost", "shutting_down",
                   "stopped", "unknown_env"))


class WorkerModel:
    """What LoadedModel.real_model weakly refers to; its class name is what ComfyUI's log lines
    print for the model."""

    __slots__ = ("env", "key", "__weakref__")

    def __init__(self, env: str, key: str) -> None:
        self.env, self.key = env, key

    def __repr__(self) -> str:
        return "<worker model %s in env %s>" % (self.key, self.env)


class StandIn:
    """One model of one worker generation, as ComfyUI's memory manager sees it. Its resident
    figure is the worker's last receipt, not a live reading."""

    parent = None  # never a clone of a host model

    def __init__(self, host: Host, env: str, key: str, generation: int, size: int,
                 resident: int, device: Any) -> None:
        self.host, self.env, self.key, self.generation = host, env, key, generation
        self.size, self.resident = int(size), int(resident)
        self.load_device = device
        self.offload_device = device  # eviction is the worker's: the device is only a label
        self.model = WorkerModel(env, key)
        # unload_model_and_clones compares it on every live entry: unique, so a host model and
        # its clones never match a worker's model.
        self.clone_base_uuid = uuid.uuid4()
        self.gone: str | None = None  # why the worker's model is gone (died, replaced)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            "the comfy-orch stand-in for model %s of env %s has no %r: ComfyUI used a member "
            "outside the declared surface (comfy_orch/comfyui/_stand_ins.py SURFACE)"
            % (self.key, self.env, name))

    def __repr__(self) -> str:
        return "<comfy-orch stand-in %s/%s gen %d: %d of %d bytes resident>" % (
            self.env, self.key, self.generation, self.resident, self.size)

    # -- what model_management reads ----------------------------------------------------------

    def model_size(self) -> int:
        return self.size

    def loaded_size(self) -> int:
        return self.resident

    def current_loaded_device(self) -> Any:
        return self.load_device

    def model_dtype(self) -> None:
        return None

    def model_patches_to(self, _device_or_dtype: object) -> None:
        return None

    def model_patches_models(self) -> list[Any]:
        return []

    def get_nested_additional_models(self) -> list[Any]:
        return []

    def lowvram_patch_counter(self) -> int:
        return 0

    def is_dynamic(self) -> bool:
        # Never: a dynamic model is skipped by free_memory(for_dynamic=True) and by pin
        # eviction, and a worker model must stay evictable from ComfyUI.
        return False

    def is_clone(self, other: object) -> bool:
        return (isinstance(other, StandIn) and other.env == self.env and other.key == self.key
                and other.generation == self.generation)

    # -- loads raise on a dead worker; evictions never raise ---------------------------------

    def partially_load(self, _device: object, _extra_memory: int,
                       force_patch_weights: bool = False) -> int:
        if self.gone:
            raise RuntimeError("model %s of env %s is no longer available: %s. Run the node that "
                               "loads it again." % (self.key, self.env, self.gone))
        # The worker's pager brings pages back when its node faults them: nothing moves now.
        return 0

    def partially_unload(self, _device: object, memory_to_free: int) -> int:
        return self._evict(memory_to_free)

    def detach(self, unpatch_all: bool = True) -> None:
        if self.resident > 0:
            self._evict(self.resident)

    def _evict(self, nbytes: int) -> int:
        if self.gone:
            freed, self.resident = self.resident, 0
            return freed
        if self.resident == 0 or nbytes <= 0:
            return 0
        try:
            receipt = self.host.evict(self.env, self.generation, min(int(nbytes), 1 << 62))
        except Exception as e:
            if getattr(e, "code", None) in _GONE:  # its memory went with the worker
                self.gone = str(e)
                _log.warning("[comfy-orch] model %s of env %s: %s; counted as offloaded",
                             self.key, self.env, e)
                freed, self.resident = self.resident, 0
                return freed
            # Anything else (a worker busy past the call's deadline, a bad answer): nothing is
            # known to be freed, and the model stays what the last receipt said.
            _log.warning("[comfy-orch] evicting model %s of env %s failed: %s; nothing counted "
                         "as freed", self.key, self.env, e)
            return 0
        for m in receipt.get("models", []):
            if isinstance(m, dict) and m.get("key") == self.key:
                self.resident = max(0, min(int(m.get("resident", 0)), self.size))
        freed = max(0, int(receipt.get("freed", 0)))
        _log.debug("[comfy-orch] evicted %d of %d bytes asked from %s/%s (receipt)", freed,
                   nbytes, self.env, self.key)
        return freed


class StandIns:
    """The stand-ins of one host, kept in step with its workers' models at node boundaries."""

    def __init__(self, host: Host, management: ModuleType, device: Any) -> None:
        self._host, self._mm, self._device = host, management, device
        self._lock = threading.Lock()
        self._by_key: dict[tuple[str, str], StandIn] = {}

    def sync(self) -> None:
        """After a node: new worker models go in at index 0 (as ComfyUI inserts a load), models
        that became resident again go back in, and models whose worker generation is gone leave
        the list."""
        with self._lock:
            try:
                models = self._host.models()
            except Exception as e:  # a stopped host has no models
                _log.debug("[comfy-orch] stand-ins not updated: %s", e)
                return
            seen = set()
            for m in models:
                ident = (m["env"], m["key"])
                seen.add(ident)
                s = self._by_key.get(ident)
                if s is not None and s.generation != m["generation"]:
                    self._drop(s, "its worker was replaced")
                    s = None
                if s is None:
                    s = StandIn(self._host, m["env"], m["key"], m["generation"], m["size"],
                                m["resident"], self._device)
                    self._by_key[ident] = s
                else:
                    s.resident = max(0, min(int(m["resident"]), s.size))
                if s.resident > 0 and self._index(s) is None:
                    self._insert(s)
            for ident in [i for i in self._by_key if i not in seen]:
                self._drop(self._by_key[ident], "its worker no longer has it")

    def _index(self, s: StandIn) -> int | None:
        for i, loaded in enumerate(self._mm.current_loaded_models):
            if getattr(loaded, "model", None) is s:
                return i
        return None

    def _insert(self, s: StandIn) -> None:
        # As ComfyUI's model_load would set them, by hand: going through load_models_gpu would
        # ask ComfyUI to make room for a model that is already loaded elsewhere.
        loaded = self._mm.LoadedModel(s)
        loaded.real_model = weakref.ref(s.model)
        loaded.model_finalizer = weakref.finalize(s.model, self._mm.cleanup_models)
        loaded.model_finalizer.atexit = False
        loaded.currently_used = False  # not a model of the running prompt, for ComfyUI
        self._mm.current_loaded_models.insert(0, loaded)

    def _drop(self, s: StandIn, why: str) -> None:
        s.gone = s.gone or why
        i = self._index(s)
        if i is not None:
            loaded = self._mm.current_loaded_models.pop(i)
            if getattr(loaded, "model_finalizer", None) is not None:
                loaded.model_finalizer.detach()
        del self._by_key[(s.env, s.key)]
