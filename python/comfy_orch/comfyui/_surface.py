"""Every member of ComfyUI's own modules that comfy_orch.comfyui reads, calls or replaces, declared
in this one place (docs/comfyui.md, "The surface"). The check is `hasattr` by name, never a
getattr with a default, so a renamed member is reported, not silently read as absent.

FATAL members are what the memory integration cannot work without: a ComfyUI missing one is not
patched at all (its packs still run isolated, but worker models are not in its
current_loaded_models). DEGRADE members turn one feature off, named."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # (module, member, severity, use, present): one line each of check()'s report.
    Report = list[tuple[str, str, str, str, bool]]

FATAL, DEGRADE = "fatal", "degrade"

# (module, member, severity, what uses it)
SURFACE = (
    ("comfy.model_management", "current_loaded_models", FATAL,
     "worker models are stand-ins in this list"),
    ("comfy.model_management", "LoadedModel", FATAL, "each stand-in is wrapped as ComfyUI wraps a "
     "loaded model"),
    ("comfy.model_management", "cleanup_models", FATAL, "a stand-in's finalizer, as ComfyUI's"),
    ("comfy.model_management", "free_memory", FATAL, "ComfyUI's eviction reaches stand-ins"),
    ("comfy.model_management", "unload_all_models", FATAL, "the Free button and the OOM path"),
    ("comfy.model_management", "soft_empty_cache", FATAL, "broadcast as a free to every worker"),
    ("comfy.model_management", "get_torch_device", FATAL, "a stand-in's load device"),
    # comfy-env's host floor (reference comfy-env.md §3.14: ComfyUI of 2024-08/09 on).
    ("comfy.model_management", "get_free_memory", FATAL, "free_memory's reading, per device"),
    ("comfy.model_management", "minimum_inference_memory", FATAL, "the floor's era"),
    ("comfy.model_management", "EXTRA_RESERVED_VRAM", FATAL, "the floor's era"),
    ("comfy.model_management", "extra_reserved_memory", FATAL, "the floor's era"),
    # LoadedModel.model_unload evicts through these on the model (a stand-in implements them);
    # a ComfyUI whose patcher lacks them unloads through unpatch_model, which a stand-in has not.
    ("comfy.model_patcher", "ModelPatcher.detach", FATAL, "model_unload's eviction API"),
    ("comfy.model_patcher", "ModelPatcher.partially_unload", FATAL, "model_unload's eviction API"),
    ("comfy.model_patcher", "ModelPatcher.loaded_size", FATAL, "model_unload's eviction API"),
    ("comfy.model_management", "processing_interrupted", DEGRADE,
     "ComfyUI's interrupt reaches the worker node"),
    ("comfy.model_management", "InterruptProcessingException", DEGRADE,
     "a worker's interrupt ends the node as ComfyUI's own"),
    ("comfy.model_management", "MAX_PINNED_MEMORY", DEGRADE,
     "ComfyUI's pinning is held to the host's share of the one pinned budget"),
    ("comfy.cli_args", "args", DEGRADE, "the host's memory flags follow ComfyUI's arguments"),
    ("comfy.utils", "PROGRESS_BAR_HOOK", DEGRADE, "worker progress drives ComfyUI's progress bar"),
)


def check(import_missing: bool = True,
          errors: dict[str, BaseException] | None = None) -> Report:
    """[(module, member, severity, use, present)] for every declared member. Modules are taken
    from sys.modules, or imported when `import_missing` (the canary, outside ComfyUI); a module
    that does not import has none of its members, and `errors` (a dict) gets its exception."""
    report: Report = []
    modules: dict[str, ModuleType | None] = {}
    for module_name, member, severity, use in SURFACE:
        if module_name not in modules:
            module = sys.modules.get(module_name)
            if module is None and import_missing:
                try:
                    module = importlib.import_module(module_name)
                except Exception as exc:  # the report says which module did not import, and why
                    module = None
                    if errors is not None:
                        errors[module_name] = exc
            modules[module_name] = module
        module = modules[module_name]
        report.append((module_name, member, severity, use, _has(module, member)))
    return report


def _has(module: object, dotted: str) -> bool:
    """hasattr by name, through a class for "Class.member"."""
    target = module
    for name in dotted.split("."):
        if target is None or not hasattr(target, name):
            return False
        target = getattr(target, name)
    return True


def missing(report: Report, severity: str | None = None) -> list[str]:
    return ["%s.%s" % (m, name) for m, name, sev, _use, present in report
            if not present and (severity is None or sev == severity)]
