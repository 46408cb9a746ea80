// prompt_needs: what a ComfyUI API prompt needs of a host (issue 58; docs/fleet.md, "What a host
// reports"): its node classes, and the models its loader nodes name, each as the folder it is
// loaded from and the file the loader was asked for ("checkpoints/sd15.safetensors").
//
// A loader's model input is recognised by executor::model_names_of (model_inputs.hpp), the rule
// that also labels the models a serve host holds, so that what a prompt needs and what a host
// reports resident are written alike. A pack's loader with inputs of its own names no model (the
// gateway then treats the prompt as needing none: no host is warm for it, none cold).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/fleet/placement.hpp"

namespace orch::fleet {

struct prompt_needs_reading {
  std::optional<prompt_needs> needs;
  std::string error;  // when needs is empty: which node and field, and what is wrong
};

// Reads an API prompt ({"<id>": {"class_type": ..., "inputs": {...}}, ...}) into what it needs.
// The prompt is a client's: each node must be an object with a non-empty class_type string of
// at most 1 KiB and, when present, an inputs object; at most `max_nodes` nodes. `_meta` and other
// fields are ignored.
prompt_needs_reading prompt_needs_of(const nlohmann::json& prompt, std::string prompt_id = {},
                                     std::size_t max_nodes = 100'000);

}  // namespace orch::fleet
