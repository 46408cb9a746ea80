// What a prompt needs (prompt_needs.hpp): its node classes, and the models its loaders name as
// "<folder>/<file>", on hand-made prompts and on real ones (prompts/PROVENANCE.md).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "orch/fleet/prompt_needs.hpp"

namespace orch::fleet {
namespace {

using nlohmann::json;
using names = std::set<std::string>;

json read_prompt(const std::string& file) {
  std::ifstream in(std::string(ORCH_FLEET_PROMPTS) + "/" + file);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

TEST(prompt_needs, sdxl_default_graph_needs_its_classes_and_both_checkpoints) {
  const auto r = prompt_needs_of(read_prompt("default_graph_sdxl1_0.json"), "p1");
  ASSERT_TRUE(r.needs) << r.error;
  EXPECT_EQ(r.needs->prompt_id, "p1");
  EXPECT_EQ(r.needs->node_classes,
            (names{"CLIPTextEncode", "CheckpointLoaderSimple", "ConditioningZeroOut",
                   "EmptyLatentImage", "KSamplerAdvanced", "SaveImage", "VAEDecode"}));
  EXPECT_EQ(r.needs->models, (names{"checkpoints/sd_xl_base_1.0.safetensors",
                                    "checkpoints/sd_xl_refiner_1.0.safetensors"}));
}

TEST(prompt_needs, a_packs_own_loader_inputs_name_no_model) {
  // DownloadAndLoadMoGe2Model's "model" is a file of the pack's own: no ComfyUI folder says so.
  const auto r = prompt_needs_of(read_prompt("IMG_to_GLB_Pixal3D_MEDIUM.json"));
  ASSERT_TRUE(r.needs) << r.error;
  EXPECT_EQ(r.needs->node_classes.size(), 14u);
  EXPECT_EQ(r.needs->node_classes.count("Pixal3DLoadPipeline"), 1u);
  EXPECT_TRUE(r.needs->models.empty());
}

TEST(prompt_needs, comfyui_loaders_name_their_folders) {
  const json prompt = {
      {"1",
       {{"class_type", "LoraLoader"},
        {"inputs", {{"model", {"0", 0}}, {"lora_name", "detail.safetensors"}}}}},
      {"2", {{"class_type", "VAELoader"}, {"inputs", {{"vae_name", "ae.safetensors"}}}}},
      {"3", {{"class_type", "UNETLoader"}, {"inputs", {{"unet_name", "flux.safetensors"}}}}},
      {"4",
       {{"class_type", "DualCLIPLoader"},
        {"inputs", {{"clip_name1", "t5.safetensors"}, {"clip_name2", "l.safetensors"}}}}},
      {"5", {{"class_type", "CLIPVisionLoader"}, {"inputs", {{"clip_name", "vit.safetensors"}}}}},
      {"6",
       {{"class_type", "ControlNetLoader"},
        {"inputs", {{"control_net_name", "canny.safetensors"}}}}},
      {"7", {{"class_type", "UpscaleModelLoader"}, {"inputs", {{"model_name", "4x.pth"}}}}},
      {"8", {{"class_type", "KSampler"}, {"inputs", {{"sampler_name", "euler"}}}}}};
  const auto r = prompt_needs_of(prompt);
  ASSERT_TRUE(r.needs) << r.error;
  EXPECT_EQ(r.needs->models, (names{"clip_vision/vit.safetensors", "controlnet/canny.safetensors",
                                    "diffusion_models/flux.safetensors", "loras/detail.safetensors",
                                    "text_encoders/l.safetensors", "text_encoders/t5.safetensors",
                                    "upscale_models/4x.pth", "vae/ae.safetensors"}));
}

TEST(prompt_needs, a_model_input_fed_by_a_link_names_nothing) {
  const json prompt = {
      {"1", {{"class_type", "CheckpointLoaderSimple"}, {"inputs", {{"ckpt_name", {"9", 0}}}}}}};
  const auto r = prompt_needs_of(prompt);
  ASSERT_TRUE(r.needs) << r.error;
  EXPECT_TRUE(r.needs->models.empty());
}

TEST(prompt_needs, model_name_is_a_model_only_for_the_upscale_loader) {
  EXPECT_EQ(model_folder_of("UpscaleModelLoader", "model_name"), "upscale_models");
  EXPECT_FALSE(model_folder_of("SomePackLoader", "model_name"));
  EXPECT_EQ(model_folder_of("CLIPLoader", "clip_name"), "text_encoders");
  EXPECT_EQ(model_names_of("CheckpointLoader|pysssss", json{{"ckpt_name", "a.ckpt"}}),
            std::vector<std::string>{"checkpoints/a.ckpt"});
}

TEST(prompt_needs, a_node_that_is_wrong_is_named) {
  EXPECT_EQ(prompt_needs_of(json::array()).error, "the prompt is not an object of nodes");
  EXPECT_EQ(prompt_needs_of(json{{"7", 3}}).error, "node 7: not an object");
  EXPECT_EQ(prompt_needs_of(json{{"7", {{"inputs", json::object()}}}}).error,
            "node 7: class_type: not a string");
  EXPECT_EQ(prompt_needs_of(json{{"7", {{"class_type", ""}}}}).error,
            "node 7: class_type: empty or longer than 1 KiB");
  EXPECT_EQ(prompt_needs_of(json{{"7", {{"class_type", std::string(1025, 'A')}}}}).error,
            "node 7: class_type: empty or longer than 1 KiB");
  EXPECT_EQ(prompt_needs_of(json{{"7", {{"class_type", "A"}, {"inputs", 1}}}}).error,
            "node 7: inputs: not an object");
}

TEST(prompt_needs, more_nodes_than_the_bound_are_refused) {
  json prompt = json::object();
  for (int i = 0; i < 11; ++i) prompt[std::to_string(i)] = {{"class_type", "A"}};
  EXPECT_EQ(prompt_needs_of(prompt, {}, 10).error, "the prompt has 11 nodes, more than 10");
  EXPECT_TRUE(prompt_needs_of(prompt, {}, 11).needs);
}

TEST(prompt_needs, a_file_name_over_1_kib_names_no_model) {
  const json prompt = {{"1",
                        {{"class_type", "CheckpointLoaderSimple"},
                         {"inputs", {{"ckpt_name", std::string(1025, 'x')}}}}}};
  const auto r = prompt_needs_of(prompt);
  ASSERT_TRUE(r.needs) << r.error;
  EXPECT_TRUE(r.needs->models.empty());
}

}  // namespace
}  // namespace orch::fleet
