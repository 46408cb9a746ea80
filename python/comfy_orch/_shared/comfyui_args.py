"""ComfyUI's command-line arguments in every worker (docs/comfyui.md, "ComfyUI's arguments in
the workers"). A worker never parses ComfyUI's command line: comfy.cli_args gives it the
parser's defaults, so a pack that imports comfy.model_management on a machine without CUDA died
of "Torch not compiled with CUDA enabled" although ComfyUI runs with --cpu.

ComfyUI's process (comfy_orch.comfyui, through export) writes the arguments that change what
comfy.model_management or a pack sees into COMFY_ORCH_COMFYUI_ARGS before its workers start; a
worker sets them on comfy.cli_args.args right after that module runs, before anything reads it,
at whatever time the pack first imports it. A worker whose device is the CPU or the simulated
GPU runs ComfyUI with --cpu in any case (a headless deployment has no ComfyUI process to ask);
COMFY_CPU=1 (comfy-env's spelling) does the same. The worker's side is install()."""

from __future__ import annotations

import json
import os

from . import import_hooks

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

VARIABLE = "COMFY_ORCH_COMFYUI_ARGS"

# comfy.cli_args.args attributes that comfy.model_management, comfy.model_management's device
# and dtype choices, folder_paths or a pack reads (ComfyUI a125cd84).
MIRRORED = (
    "cpu", "gpu_only", "highvram", "normalvram", "lowvram", "novram", "reserve_vram",
    "vram_headroom", "disable_smart_memory", "disable_pinned_memory", "async_offload",
    "disable_async_offload", "disable_dynamic_vram", "enable_dynamic_vram", "force_non_blocking",
    "cuda_device", "directml", "oneapi_device_selector", "disable_ipex_optimize",
    "cuda_malloc", "disable_cuda_malloc", "deterministic", "fast", "supports_fp8_compute",
    "force_fp32", "force_fp16", "fp32_unet", "fp64_unet", "bf16_unet", "fp16_unet",
    "fp8_e4m3fn_unet", "fp8_e5m2_unet", "fp8_e8m0fnu_unet", "fp16_vae", "fp32_vae", "bf16_vae",
    "cpu_vae", "fp8_e4m3fn_text_enc", "fp8_e5m2_text_enc", "fp16_text_enc", "fp32_text_enc",
    "bf16_text_enc", "force_channels_last", "use_split_cross_attention",
    "use_quad_cross_attention", "use_pytorch_cross_attention", "use_sage_attention",
    "use_flash_attention", "disable_xformers", "force_upcast_attention",
    "dont_upcast_attention", "disable_mmap", "mmap_torch_files", "base_directory",
    "input_directory", "output_directory", "temp_directory", "user_directory",
    "preview_method", "verbose",
)


def _plain(value: object) -> object:
    """An argument's value as JSON: enums by their value, sets as sorted lists."""
    if isinstance(value, (set, frozenset, list, tuple)):
        return sorted((_plain(v) for v in value), key=str)
    enum_value = getattr(value, "value", None)
    if enum_value is not None and not isinstance(value, (str, int, float, bool)):
        return enum_value
    if isinstance(value, str):  # a str enum's value too
        return str(getattr(value, "value", value))
    return value


def snapshot(args: object) -> dict[str, object]:
    """{name: value} of ComfyUI's parsed `args` (comfy.cli_args.args) for the workers."""
    return {name: _plain(getattr(args, name)) for name in MIRRORED if hasattr(args, name)}


def export(args: object) -> dict[str, object]:
    """Writes ComfyUI's arguments where the workers it starts next read them."""
    values = snapshot(args)
    os.environ[VARIABLE] = json.dumps(values, sort_keys=True)
    if values.get("cpu"):
        os.environ["COMFY_CPU"] = "1"  # comfy-env's variable; packs written for it read it
    return values


def wanted() -> dict[str, Any]:
    """What this worker sets on comfy.cli_args.args: the host's snapshot, and --cpu where the
    worker computes on the CPU (the cpu and sim devices, or COMFY_CPU=1): it has no GPU for
    comfy.model_management to take, whatever ComfyUI's own device is."""
    values: dict[str, Any] = {}
    text = os.environ.get(VARIABLE)
    if text:
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            values = {k: v for k, v in parsed.items() if k in MIRRORED}
    device = os.environ.get("ORCH_DEVICE", "cpu").split(":")[0]
    if device in ("cpu", "sim") or os.environ.get("COMFY_CPU") == "1":
        values["cpu"] = True
    return values


def _restored(cli_args: ModuleType, current: Any, value: Any) -> Any:
    """`value` in the type the parser gives `current` (enums, the --fast set): Any, as the
    values of ComfyUI's arguments are whatever its parser made."""
    if isinstance(current, (set, frozenset)) or (current is None and isinstance(value, list)):
        feature = getattr(cli_args, "PerformanceFeature", None)
        return {feature(v) if feature is not None else v for v in value or ()}
    enum_type = type(current)
    if current is not None and hasattr(current, "value") and not isinstance(current, bool):
        try:
            return enum_type(value)
        except (TypeError, ValueError):
            return current
    return value


def apply(cli_args: ModuleType) -> None:
    args = getattr(cli_args, "args", None)
    if args is None:
        return
    for name, value in wanted().items():
        setattr(args, name, _restored(cli_args, getattr(args, name, None), value))


def install() -> None:
    """Sets ComfyUI's arguments as soon as the pack (or ComfyUI's code it imports) imports
    comfy.cli_args; now, when it already has."""
    import_hooks.after_import("comfy.cli_args", apply)
