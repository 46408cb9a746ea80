// The derivation of an env from its manifest and the host stack (env_derivation.hpp), the ABI
// tag (host_stack.hpp) and env.stamp.json (env_stamp.hpp).
#include "orch/manifests/env_derivation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "manifest_test_support.hpp"
#include "orch/manifests/env_stamp.hpp"

namespace orch::manifests {
namespace {

namespace fs = std::filesystem;

env_manifest manifest_of(const std::string& text) {
  auto table = toml::parse(text);
  diagnostics diags;
  auto m = parse_env_manifest(table, "/packs/p/nodes/comfy-env.toml", diags);
  EXPECT_FALSE(diags.has_errors()) << testing::dump(diags);
  return m;
}

const host_stack cuda_host{"3.11", "2.10.1+cu128", "cu128"};
const host_stack cpu_host{"3.11", "1.13.0a0", "cpu"};
const target_platform linux_platform{"linux-64", "2.36"};

env_derivation derive(const std::string& text, const host_stack& stack = cuda_host) {
  return derive_env("p-nodes", manifest_of(text), stack, linux_platform, "/packs/p/nodes");
}

const toml::table& feature(const env_derivation& d) {
  return *d.pixi_manifest["feature"]["node"].as_table();
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(host_stack, abi_tag_follows_adr_0039_and_compares_with_the_legacy_spelling) {
  EXPECT_EQ(abi_tag(cuda_host), "py311-torch2.10-cu128");
  EXPECT_EQ(abi_tag(cpu_host), "py311-torch1.13-cpu");
  EXPECT_EQ(abi_tag(host_stack{"3.12", "", ""}), "py312-notorch");
  EXPECT_TRUE(same_abi_tag("py311-torch2.10-cu128", "py311-torch2-10-cu128"));
  EXPECT_FALSE(same_abi_tag("py311-torch2.10-cu128", "py311-torch2.8-cu128"));
  EXPECT_EQ(torch_pin(cuda_host), "==2.10.*");
  EXPECT_EQ(torchvision_pin(cuda_host), "==0.25.*");
  EXPECT_EQ(torchaudio_pin(cuda_host), "==2.10.*");
  EXPECT_EQ(torchvision_pin(cpu_host), std::nullopt);  // no pairing rule before 2.0
  EXPECT_EQ(torch_pin(host_stack{"3.11", "", ""}), std::nullopt);
}

TEST(env_derivation, the_torch_family_is_pinned_to_the_host_and_the_packs_entries_dropped) {
  const auto d = derive(
      "[dependencies]\npytorch = \"*\"\nffmpeg = \"*\"\n"
      "[pypi-dependencies]\ntorch = \">=2.0\"\nTorchVision = \"*\"\nnumpy = \">=1.26\"\n");
  const auto& pypi = *feature(d)["pypi-dependencies"].as_table();
  EXPECT_EQ(pypi["torch"].value<std::string>(), "==2.10.*");
  EXPECT_EQ(pypi["torchvision"].value<std::string>(), "==0.25.*");
  EXPECT_EQ(pypi["torchaudio"].value<std::string>(), "==2.10.*");
  EXPECT_FALSE(pypi.contains("TorchVision"));
  EXPECT_EQ(pypi["numpy"].value<std::string>(), ">=1.26");
  EXPECT_FALSE(feature(d)["dependencies"].as_table()->contains("pytorch"));
  EXPECT_EQ(feature(d)["dependencies"]["python"].value<std::string>(), "3.11.*");
  EXPECT_EQ(d.notes.size(), 3u);  // one per dropped entry
  for (const auto& n : d.notes) EXPECT_NE(n.find("py311-torch2.10-cu128"), std::string::npos);
  EXPECT_EQ(d.requirements, std::vector<std::string>{"numpy>=1.26"});
  EXPECT_EQ(d.conda_packages, std::vector<std::string>{"ffmpeg"});
}

TEST(env_derivation, activation_env_is_merged_and_the_builders_key_wins) {
  const auto d = derive(
      "[activation.env]\nMY_FLAG = \"1\"\nKMP_DUPLICATE_LIB_OK = \"FALSE\"\n"
      "[activation]\nscripts = [\"setup.sh\"]\n");
  const auto& activation = *feature(d)["activation"].as_table();
  EXPECT_EQ(activation["env"]["MY_FLAG"].value<std::string>(), "1");
  EXPECT_EQ(activation["env"]["KMP_DUPLICATE_LIB_OK"].value<std::string>(), "TRUE");
  EXPECT_TRUE(activation["scripts"].is_array());
}

TEST(env_derivation, identity_ignores_comments_and_env_vars_but_not_dependencies) {
  const std::string base = "python = \"3.11\"\n[pypi-dependencies]\nnumpy = \"*\"\n";
  const auto first = derive(base);
  EXPECT_EQ(first.identity.rfind("orch1:", 0), 0u);
  EXPECT_EQ(derive("# a comment\n" + base + "# another\n").identity, first.identity);
  EXPECT_EQ(derive(base + "[env_vars]\nFOO = \"bar\"\n").identity, first.identity);
  EXPECT_NE(derive(base + "scipy = \"*\"\n").identity, first.identity);
  EXPECT_NE(derive("python = \"3.12\"\n[pypi-dependencies]\nnumpy = \"*\"\n").identity,
            first.identity);
  // Another host stack is another derivation.
  EXPECT_NE(derive(base, cpu_host).identity, first.identity);
}

TEST(env_derivation, pypi_entries_become_pip_requirements) {
  const auto d = derive(
      "[pypi-dependencies]\n"
      "a = \"*\"\nb = \"1.2\"\nc = \"~=3.0\"\n"
      "d = { version = \">=2\", extras = [\"x\", \"y\"] }\n"
      "e = { url = \"https://example.org/e-1.0-py3-none-any.whl\" }\n"
      "f = { path = \"wheels/f-1.0-py3-none-any.whl\" }\n"
      "g = { git = \"https://example.org/g.git\", rev = \"abc123\" }\n"
      "[target.linux-64.pypi-dependencies]\nh = \">=1\"\n"
      "[target.win-64.pypi-dependencies]\nwinonly = \"*\"\n");
  for (const char* want :
       {"a", "b==1.2", "c~=3.0", "d[x,y]>=2", "e @ https://example.org/e-1.0-py3-none-any.whl",
        "f @ file:///packs/p/nodes/wheels/f-1.0-py3-none-any.whl",
        "g @ git+https://example.org/g.git@abc123", "h>=1"}) {
    EXPECT_TRUE(has(d.requirements, want)) << want;
  }
  EXPECT_FALSE(has(d.requirements, "winonly"));  // another platform's, kept in pixi.toml only
  EXPECT_TRUE(feature(d)["target"]["win-64"]["pypi-dependencies"]["winonly"]);
}

TEST(env_derivation, cuda_wheels_need_a_cuda_torch) {
  const std::string text = "[cuda]\npackages = [\"cumesh\", \"torch\"]\n";
  const auto gpu = derive(text);
  EXPECT_TRUE(has(gpu.requirements, "cumesh"));
  EXPECT_FALSE(has(gpu.requirements, "torch"));
  const auto cpu = derive(text, cpu_host);
  EXPECT_FALSE(has(cpu.requirements, "cumesh"));
  EXPECT_TRUE(std::any_of(cpu.notes.begin(), cpu.notes.end(), [](const std::string& n) {
    return n.find("cumesh") != std::string::npos && n.find("no CUDA") != std::string::npos;
  }));
}

TEST(env_derivation, pixi_toml_is_one_self_contained_environment) {
  const auto d = derive("[workspace]\nchannels = [\"nvidia\", \"conda-forge\"]\n");
  const auto text = pixi_toml_text(d, "/packs/p/nodes/comfy-env.toml");
  const auto parsed = toml::parse(text);
  EXPECT_EQ(parsed["workspace"]["name"].value<std::string>(), "comfy-env-p-nodes");
  EXPECT_EQ(parsed["workspace"]["channels"].as_array()->size(), 2u);
  EXPECT_EQ(parsed["workspace"]["platforms"][0].value<std::string>(), "linux-64");
  EXPECT_EQ(parsed["environments"]["default"]["features"][0].value<std::string>(), "node");
  EXPECT_EQ(parsed["environments"]["default"]["no-default-feature"].value<bool>(), true);
  EXPECT_EQ(
      parsed["feature"]["node"]["system-requirements"]["libc"]["version"].value<std::string>(),
      "2.36");
  EXPECT_EQ(text.rfind("# Generated by comfy-orch", 0), 0u);
}

TEST(env_stamp, round_trips_and_reads_comfy_envs_stamps) {
  testing::temp_dir tmp;
  env_stamp s;
  s.abi_tag = "py311-torch2.10-cu128";
  s.torch_pin = "==2.10.*";
  s.provenance = "comfy-orch install --backend venv";
  s.comfy_orch_version = "0.1.0";
  s.backend = "venv";
  s.identity = "orch1:abc";
  tmp.write("ours/env.stamp.json", env_stamp_text(s));
  const auto ours = read_env_stamp(tmp.path() / "ours");
  ASSERT_TRUE(ours.stamp) << ours.problem;
  EXPECT_EQ(ours.stamp->identity, "orch1:abc");
  EXPECT_EQ(ours.stamp->comfy_env_version, std::nullopt);

  tmp.write("theirs/env.stamp.json",
            "{\"comfy_env_version\": \"0.5.2\", \"abi_tag\": \"py313-torch2-10-cu128\", "
            "\"torch_pin\": \"==2.10.*\", \"provenance\": \"install\", "
            "\"pixi_lock_sha256\": \"00ff\"}\n");
  const auto theirs = read_env_stamp(tmp.path() / "theirs");
  ASSERT_TRUE(theirs.stamp) << theirs.problem;
  EXPECT_EQ(theirs.stamp->comfy_env_version, "0.5.2");
  EXPECT_EQ(theirs.stamp->identity, std::nullopt);
  EXPECT_EQ(theirs.stamp->pixi_lock_sha256, "00ff");

  EXPECT_FALSE(read_env_stamp(tmp.path() / "none").present);
}

TEST(env_stamp, hostile_stamps_are_problems_not_crashes) {
  testing::temp_dir tmp;
  const std::pair<const char*, std::string> cases[] = {
      {"notjson", "{\"abi_tag\": "},
      {"array", "[1, 2]"},
      {"wrongtype", "{\"abi_tag\": 3}"},
      {"noabi", "{\"provenance\": \"x\"}"},
      {"huge", std::string(70 * 1024, ' ') + "{}"},
      {"nested", std::string(5000, '[') + std::string(5000, ']')},
  };
  for (const auto& [dir, text] : cases) {
    tmp.write(std::string(dir) + "/env.stamp.json", text);
    const auto r = read_env_stamp(tmp.path() / dir);
    EXPECT_TRUE(r.present) << dir;
    EXPECT_FALSE(r.stamp) << dir;
    EXPECT_FALSE(r.problem.empty()) << dir;
  }
}

}  // namespace
}  // namespace orch::manifests
