"""comfy.model_management as far as comfy-orch touches it: the interrupt flag, and the loaded-model
bookkeeping (LoadedModel, current_loaded_models, free_memory, unload_all_models) with the
behaviour of Comfy-Org/ComfyUI 02b2b3886164b1fa412d393a3ed0674b9d1cf010, written here from its
facts (no code copied):

- LoadedModel holds a weak reference to the patcher; model_unload(memory_to_free) first tries
  partially_unload when memory_to_free is below the loaded size and keeps the model when enough
  was freed, else detaches it and drops its finalizer;
- free_memory sorts candidates on (-offloaded, refcount of the patcher, size, index) and asks
  each for memory_required - get_free_memory(device); unloaded entries are popped, highest index
  first; then soft_empty_cache;
- unload_all_models is free_memory(1e30, device) for every device;
- unload_model_and_clones compares every live entry's patcher's clone_base_uuid with the
  model's;
- load_models_gpu (a125cd84) reuses the list's entry for a model already loaded, else makes a
  LoadedModel, whose model_load patches the model onto its load device (a full load here:
  ModelPatcher.load), and inserts it at the list's head.

The device is a fixture: its free memory is DEVICE_TOTAL less what the loaded models of that
device hold (as a card's free reading drops with what any process holds on it). Pinning records
sizes without registering anything. Workers import this module too (for the interrupt flag), so
torch is imported only where a device is asked for.

As ComfyUI's does at import (through get_torch_device), the module fails where --cpu is off and
there is no CUDA device, with torch's own message: a worker that is not handed ComfyUI's --cpu
dies here, as on the real tree. Where the importer has not imported torch, /dev/nvidiactl stands
for torch.cuda.is_available() (importing torch here would cost every worker a second)."""

import gc
import os
import sys
import threading
import weakref

from comfy.cli_args import args


def _cuda_available():
    torch = sys.modules.get("torch")
    return torch.cuda.is_available() if torch is not None else os.path.exists("/dev/nvidiactl")


if not args.cpu and not _cuda_available():
    raise AssertionError("Torch not compiled with CUDA enabled")


class InterruptProcessingException(Exception):
    pass


interrupt_processing_mutex = threading.RLock()
interrupt_processing = False


def interrupt_current_processing(value=True):
    global interrupt_processing
    with interrupt_processing_mutex:
        interrupt_processing = value


def processing_interrupted():
    with interrupt_processing_mutex:
        return interrupt_processing


def throw_exception_if_processing_interrupted():
    global interrupt_processing
    with interrupt_processing_mutex:
        if interrupt_processing:
            interrupt_processing = False
            raise InterruptProcessingException()


# -- devices ------------------------------------------------------------------------------------

DEVICE_TOTAL = 1 << 30
DISABLE_SMART_MEMORY = False
EXTRA_RESERVED_VRAM = 400 * 1024 * 1024
soft_empty_cache_calls = 0


def get_torch_device():
    import torch
    return torch.device("cpu")


def get_all_torch_devices(exclude_current=False):
    return [] if exclude_current else [get_torch_device()]


def get_free_memory(dev=None, torch_free_too=False):
    dev = get_torch_device() if dev is None else dev
    held = sum(m.model_loaded_memory() for m in current_loaded_models
               if m.device == dev and m.model is not None)
    free = max(0, DEVICE_TOTAL - held)
    return (free, 0) if torch_free_too else free


def soft_empty_cache(force=False):
    global soft_empty_cache_calls
    soft_empty_cache_calls += 1


# -- pinned memory ------------------------------------------------------------------------------

MAX_PINNED_MEMORY = 1 << 30
TOTAL_PINNED_MEMORY = 0
PINNED_MEMORY = {}


def pin_memory(tensor, evict_active=True):
    global TOTAL_PINNED_MEMORY
    if MAX_PINNED_MEMORY <= 0 or tensor.data_ptr() in PINNED_MEMORY:
        return False
    # ComfyUI reads tensor.nbytes; Debian's torch 1.13 has no Tensor.nbytes.
    size = tensor.nbytes if hasattr(tensor, "nbytes") else tensor.numel() * tensor.element_size()
    PINNED_MEMORY[tensor.data_ptr()] = size
    TOTAL_PINNED_MEMORY += size
    return True


def unpin_memory(tensor):
    global TOTAL_PINNED_MEMORY
    size = PINNED_MEMORY.pop(tensor.data_ptr(), None)
    if size is None:
        return False
    TOTAL_PINNED_MEMORY -= size
    return True


# -- loaded models ------------------------------------------------------------------------------

class LoadedModel:
    def __init__(self, model):
        self._model = weakref.ref(model)
        self.device = model.load_device
        self.real_model = None
        self.currently_used = True
        self.model_finalizer = None

    @property
    def model(self):
        return self._model()

    def model_memory(self):
        return self.model.model_size()

    def model_loaded_memory(self):
        return self.model.loaded_size()

    def model_offloaded_memory(self):
        return self.model.model_size() - self.model.loaded_size()

    def model_load(self, lowvram_model_memory=0, force_patch_weights=False):
        real_model = self.model.patch_model(device_to=self.device, lowvram_model_memory=0,
                                            force_patch_weights=force_patch_weights)
        self.real_model = weakref.ref(real_model)
        self.model_finalizer = weakref.finalize(real_model, cleanup_models)
        return real_model

    def model_unload(self, memory_to_free=None, unpatch_weights=True):
        if memory_to_free is not None and memory_to_free < self.model.loaded_size():
            if self.model.partially_unload(self.model.offload_device, memory_to_free) >= \
                    memory_to_free:
                return False
        self.model.detach(unpatch_weights)
        self.model_finalizer.detach()
        self.model_finalizer = None
        self.real_model = None
        return True

    def __eq__(self, other):
        return self.model is other.model

    def is_dead(self):
        return self.real_model() is not None and self.model is None


current_loaded_models = []


def cleanup_models_gc():
    if any(m.is_dead() for m in current_loaded_models):
        gc.collect()
        soft_empty_cache()


def cleanup_models():
    for i in reversed(range(len(current_loaded_models))):
        if current_loaded_models[i].real_model() is None:
            current_loaded_models.pop(i)


def free_memory(memory_required, device, keep_loaded=[], for_dynamic=False, pins_required=0,
                ram_required=0):
    cleanup_models_gc()
    candidates = []
    for i in reversed(range(len(current_loaded_models))):
        entry = current_loaded_models[i]
        if (device is None or entry.device == device) and entry not in keep_loaded \
                and not entry.is_dead():
            candidates.append((-entry.model_offloaded_memory(), sys.getrefcount(entry.model),
                               entry.model_memory(), i))
            entry.currently_used = False
    unloaded = []
    for *_, i in sorted(candidates):
        entry = current_loaded_models[i]
        if DISABLE_SMART_MEMORY and device is not None:
            to_free = 1e32
        else:
            to_free = 0 if device is None else memory_required - get_free_memory(device)
            if for_dynamic and entry.model.is_dynamic():
                memory_required -= entry.model.loaded_size()
                to_free = 0
        if to_free > 0 and entry.model_unload(to_free):
            unloaded.append(i)
    popped = [current_loaded_models.pop(i) for i in sorted(unloaded, reverse=True)]
    if popped:
        soft_empty_cache()
    return popped


def load_models_gpu(models, memory_required=0, force_patch_weights=False,
                    minimum_memory_required=None, force_full_load=False):
    cleanup_models_gc()
    for model in models:
        loaded = LoadedModel(model)
        if loaded in current_loaded_models:
            current_loaded_models[current_loaded_models.index(loaded)].currently_used = True
            continue
        loaded.model_load(force_patch_weights=force_patch_weights)
        current_loaded_models.insert(0, loaded)


def load_model_gpu(model):
    return load_models_gpu([model])


def module_size(module):
    from comfy.model_patcher import module_size as size
    return size(module)


def unload_all_models():
    for device in get_all_torch_devices():
        free_memory(1e30, device)


def unload_model_and_clones(model, unload_additional_models=True, all_devices=False):
    # Every live entry's patcher is asked for its clone_base_uuid (custom nodes call this).
    same = [m for m in current_loaded_models if m.model is not None
            and m.model.clone_base_uuid == model.clone_base_uuid]
    for m in same:
        if m.model_unload():
            current_loaded_models.remove(m)
    return len(same) > 0


# The floor comfy-env's host contract checks (reference comfy-env.md §3.14).
def minimum_inference_memory():
    return 1 << 30


def extra_reserved_memory():
    return EXTRA_RESERVED_VRAM
