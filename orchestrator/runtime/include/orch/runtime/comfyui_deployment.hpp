// comfyui_deployment: the deployment of a ComfyUI process that is the host (docs/comfyui.md,
// docs/host-library.md), from a description of its tree instead of a file:
//
//   {"root": "/path/to/ComfyUI",            the tree ([comfyui] root)
//    "custom_nodes": "...",                 optional: its packs ([packs] custom_nodes),
//                                           default <root>/custom_nodes
//    "device": "cuda:0",                    optional: [host] device
//    "protocol_level": 3,                   optional: [host] protocol_level (its aimdo's)
//    "memory": {"highvram": true, ...}}     optional: [memory], ComfyUI's arguments
//
// The description becomes deployment text that the deployment parser checks like any file, so
// a bad key or value is reported with the same diagnostics, named after the key.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"

namespace orch::runtime {

struct comfyui_deployment_text {
  std::string text;   // the deployment, in TOML
  std::string label;  // what diagnostics name as its file: "<root>/(ComfyUI host)"
};

// Errors: "invalid_description" naming the field and what it must be.
result<comfyui_deployment_text> comfyui_deployment(const nlohmann::json& description);

}  // namespace orch::runtime
