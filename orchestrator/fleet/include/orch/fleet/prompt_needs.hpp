// prompt_needs: what a ComfyUI API prompt needs of a host (issue 58; docs/fleet.md, "What a host
// reports"): its node classes, and the models its loader nodes name, each as the folder it is
// loaded from and the file the loader was asked for ("checkpoints/sd15.safetensors").
//
// A loader's model input is recognised by its name, as ComfyUI's own loaders name them (nodes.py:
// CheckpointLoaderSimple's ckpt_name from folder_paths "checkpoints", LoraLoader's lora_name from
// "loras", ...), with a few inputs whose name is shared by several folders (clip_name of
// CLIPVisionLoader, model_name of UpscaleModelLoader) taken by class. The name is the rule, not
// the input's COMBO type: neither /object_info nor the node catalogue says which folder a COMBO's
// values come from, and a pack's own loader that reuses ckpt_name means a checkpoint too. A
// pack's loader with inputs of its own names no model here (the gateway then treats the prompt
// as needing none: no host is warm for it, none cold).
//
// The same rule labels the models a serve host holds (the executor records, for each model a
// node's call created, the names this gives for that call's inputs), so that what a prompt
// needs and what a host reports resident are written alike.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/fleet/placement.hpp"

namespace orch::fleet {

// The models node `class_type` names through `inputs` (the node's inputs object; a link or any
// value that is not a non-empty string of at most 1 KiB names nothing), as "<folder>/<value>",
// sorted and without repeats. Anything not an object names nothing.
std::vector<std::string> model_names_of(std::string_view class_type, const nlohmann::json& inputs);

// The folder ComfyUI loads input `input` of `class_type` from, or nullopt when it names no model.
std::optional<std::string_view> model_folder_of(std::string_view class_type,
                                                std::string_view input);

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
