// model_inputs: which inputs of a ComfyUI node name a model file, and the folder it is loaded
// from ("checkpoints/sd15.safetensors"). An input is recognised by its name, as ComfyUI's own
// loaders name them (nodes.py: CheckpointLoaderSimple's ckpt_name from folder_paths
// "checkpoints", LoraLoader's lora_name from "loras", ...), with a few inputs whose name is shared
// by several folders (clip_name of CLIPVisionLoader, model_name of UpscaleModelLoader) taken by
// class. The name is the rule, not the input's COMBO type: neither /object_info nor the node
// catalogue says which folder a COMBO's values come from, and a pack's own loader that reuses
// ckpt_name means a checkpoint too. The executor labels the models a node's call creates with
// these names (host_runtime::label_new_stand_ins); a fleet's gateway reads a prompt's models with
// the same rule (orch/fleet/prompt_needs.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace orch::executor {

// The models node `class_type` names through `inputs` (the node's inputs object; a link or any
// value that is not a non-empty string of at most 1 KiB names nothing), as "<folder>/<value>",
// sorted and without repeats. Anything not an object names nothing.
std::vector<std::string> model_names_of(std::string_view class_type, const nlohmann::json& inputs);

// The folder ComfyUI loads input `input` of `class_type` from, or nullopt when it names no model.
std::optional<std::string_view> model_folder_of(std::string_view class_type,
                                                std::string_view input);

}  // namespace orch::executor
