#include "orch/fleet/prompt_needs.hpp"

#include <algorithm>
#include <set>
#include <utility>

namespace orch::fleet {

namespace {

constexpr std::size_t max_name_bytes = 1024;

struct input_folder {
  std::string_view input, folder;
};

// ComfyUI's loaders (nodes.py and comfy_extras, Comfy-Org/ComfyUI): an input of this name is a
// file of this folder_paths folder, whatever the class. text_encoders and diffusion_models are
// the current names of the legacy "clip" and "unet" folders.
constexpr input_folder by_input[] = {
    {"ckpt_name", "checkpoints"},
    {"lora_name", "loras"},
    {"vae_name", "vae"},
    {"unet_name", "diffusion_models"},
    {"clip_name", "text_encoders"},   // CLIPLoader
    {"clip_name1", "text_encoders"},  // DualCLIPLoader, TripleCLIPLoader, QuadrupleCLIPLoader
    {"clip_name2", "text_encoders"},
    {"clip_name3", "text_encoders"},
    {"clip_name4", "text_encoders"},
    {"control_net_name", "controlnet"},  // ControlNetLoader, DiffControlNetLoader
    {"style_model_name", "style_models"},
    {"gligen_name", "gligen"},
    {"hypernetwork_name", "hypernetworks"},
    {"audio_encoder_name", "audio_encoders"},
    {"photomaker_model_name", "photomaker"},
};

struct class_input_folder {
  std::string_view class_type, input, folder;
};

// Inputs whose name alone would be wrong or too common: taken only for these classes, before
// the table above.
constexpr class_input_folder by_class[] = {
    {"CLIPVisionLoader", "clip_name", "clip_vision"},
    {"UpscaleModelLoader", "model_name", "upscale_models"},
    {"ModelPatchLoader", "name", "model_patches"},
};

}  // namespace

std::optional<std::string_view> model_folder_of(std::string_view class_type,
                                                std::string_view input) {
  for (const auto& c : by_class)
    if (c.class_type == class_type && c.input == input) return c.folder;
  for (const auto& i : by_input)
    if (i.input == input) return i.folder;
  return std::nullopt;
}

std::vector<std::string> model_names_of(std::string_view class_type, const nlohmann::json& inputs) {
  std::vector<std::string> names;
  if (!inputs.is_object()) return names;
  for (const auto& [input, value] : inputs.items()) {
    if (!value.is_string()) continue;  // a link, or not a file name
    const auto& file = value.get_ref<const std::string&>();
    if (file.empty() || file.size() > max_name_bytes) continue;
    if (const auto folder = model_folder_of(class_type, input))
      names.push_back(std::string(*folder) + "/" + file);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

prompt_needs_reading prompt_needs_of(const nlohmann::json& prompt, std::string prompt_id,
                                     std::size_t max_nodes) {
  const auto refuse = [](std::string why) {
    return prompt_needs_reading{std::nullopt, std::move(why)};
  };
  if (!prompt.is_object()) return refuse("the prompt is not an object of nodes");
  if (prompt.size() > max_nodes)
    return refuse("the prompt has " + std::to_string(prompt.size()) + " nodes, more than " +
                  std::to_string(max_nodes));
  prompt_needs needs;
  needs.prompt_id = std::move(prompt_id);
  for (const auto& [id, node] : prompt.items()) {
    const std::string where = "node " + (id.size() > 64 ? id.substr(0, 64) + "..." : id);
    if (!node.is_object()) return refuse(where + ": not an object");
    const auto cls = node.find("class_type");
    if (cls == node.end() || !cls->is_string()) return refuse(where + ": class_type: not a string");
    const auto& class_type = cls->get_ref<const std::string&>();
    if (class_type.empty() || class_type.size() > max_name_bytes)
      return refuse(where + ": class_type: empty or longer than 1 KiB");
    needs.node_classes.insert(class_type);
    const auto inputs = node.find("inputs");
    if (inputs == node.end()) continue;
    if (!inputs->is_object()) return refuse(where + ": inputs: not an object");
    for (auto& model : model_names_of(class_type, *inputs)) needs.models.insert(std::move(model));
  }
  return {std::move(needs), {}};
}

}  // namespace orch::fleet
