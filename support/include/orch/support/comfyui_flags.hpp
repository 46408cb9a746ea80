// comfyui_flags: ComfyUI's command-line memory flags that choose between its memory managers,
// in one place: the deployment's [memory] keys (manifests), the host's manager resolution
// (plugins/host memory_manager) and, for ComfyUI as the host, its own argv all read this table
// (docs/memory-semantics.md).
#pragma once

#include <array>

namespace orch {

struct comfyui_memory_flags {
  bool disable_dynamic_vram = false;
  bool enable_dynamic_vram = false;
  bool highvram = false;
  bool gpu_only = false;
  bool novram = false;
  bool cpu = false;
};

struct comfyui_flag {
  const char* key;       // the [memory] key: "highvram"
  const char* argument;  // ComfyUI's argument: "--highvram"
  bool comfyui_memory_flags::*field;
  bool selects_ledger;  // set, it disables the pager (unless enable_dynamic_vram forces it)
  bool vram_mode;       // one of ComfyUI's mutually exclusive VRAM modes
};

// In ComfyUI's order of precedence: the first set flag that selects the ledger is the reason.
inline constexpr std::array<comfyui_flag, 6> comfyui_flag_table{{
    {"disable_dynamic_vram", "--disable-dynamic-vram", &comfyui_memory_flags::disable_dynamic_vram,
     true, false},
    {"enable_dynamic_vram", "--enable-dynamic-vram", &comfyui_memory_flags::enable_dynamic_vram,
     false, false},
    {"highvram", "--highvram", &comfyui_memory_flags::highvram, true, true},
    {"gpu_only", "--gpu-only", &comfyui_memory_flags::gpu_only, true, true},
    {"novram", "--novram", &comfyui_memory_flags::novram, true, true},
    {"cpu", "--cpu", &comfyui_memory_flags::cpu, true, true},
}};

}  // namespace orch
