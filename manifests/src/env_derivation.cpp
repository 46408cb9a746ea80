#include "orch/manifests/env_derivation.hpp"

#include <gnu/libc-version.h>

#include <algorithm>
#include <sstream>

#include "orch/support/ascii_lower.hpp"
#include "orch/support/sha256.hpp"

namespace orch::manifests {
namespace {

namespace fs = std::filesystem;

// The packages pinned to the host's stack in every env; a pack's own entries for them are
// dropped (comfy-env's _TORCH_PKGS, plus conda's name for torch).
bool is_torch_family(std::string_view name) {
  const std::string lower = ascii_lower(name);
  return lower == "torch" || lower == "torchvision" || lower == "torchaudio" || lower == "pytorch";
}

// The table a passthrough entry holds ("dependencies" -> its table), parsed back from the text
// the manifest keeps; empty when absent.
toml::table passthrough_table(const env_manifest& manifest, const std::string& key) {
  const auto it = manifest.passthrough.find(key);
  if (it == manifest.passthrough.end()) return {};
  auto parsed = toml::parse(it->second);
  if (auto* table = parsed[key].as_table()) return std::move(*table);
  return {};
}

// A pip requirement for one PyPI entry; empty with `why` set when pip cannot take it.
std::string requirement_of(const std::string& name, const toml::node& spec,
                           const fs::path& config_dir, std::string& why) {
  auto versioned = [&](std::string version) {
    const auto b = version.find_first_not_of(" \t");
    version = b == std::string::npos ? "" : version.substr(b);
    if (version.empty() || version == "*") return name;
    if (version.front() >= '0' && version.front() <= '9') return name + "==" + version;
    return name + version;
  };
  if (const auto text = spec.value_exact<std::string>()) return versioned(*text);
  const auto* table = spec.as_table();
  if (table == nullptr) {
    why = "a PyPI entry must be a version string or a table";
    return {};
  }
  std::string head = name;
  if (const auto* extras = (*table)["extras"].as_array()) {
    std::string list;
    for (const auto& e : *extras) {
      if (const auto s = e.value_exact<std::string>()) list += (list.empty() ? "" : ",") + *s;
    }
    if (!list.empty()) head += "[" + list + "]";
  }
  if (const auto url = (*table)["url"].value_exact<std::string>()) return head + " @ " + *url;
  if (const auto path = (*table)["path"].value_exact<std::string>()) {
    const fs::path p = fs::path(*path).is_absolute() ? fs::path(*path) : config_dir / *path;
    return head + " @ file://" + p.lexically_normal().string();
  }
  if (const auto git = (*table)["git"].value_exact<std::string>()) {
    std::string ref;
    for (const char* key : {"rev", "tag", "branch"}) {  // the most precise one named
      if (const auto r = (*table)[key].value_exact<std::string>(); r && ref.empty()) ref = "@" + *r;
    }
    return head + " @ git+" + *git + ref;
  }
  const auto version = (*table)["version"].value_exact<std::string>();
  const std::string line = versioned(version.value_or("*"));
  return head + line.substr(name.size());
}

class deriver {
 public:
  deriver(const std::string& env_name, const env_manifest& manifest, const host_stack& stack,
          const target_platform& platform, const fs::path& config_dir)
      : manifest_(manifest), stack_(stack), platform_(platform), config_dir_(config_dir) {
    out_.env_name = env_name;
    out_.python = manifest.python.value_or(stack.python);
  }

  env_derivation run() {
    toml::table feature;
    feature.insert_or_assign("dependencies", conda_dependencies());
    if (auto pypi = pypi_dependencies(); !pypi.empty()) {
      feature.insert_or_assign("pypi-dependencies", std::move(pypi));
    }
    if (auto targets = target_tables(); !targets.empty()) {
      feature.insert_or_assign("target", std::move(targets));
    }
    if (auto options = passthrough_table(manifest_, "pypi-options"); !options.empty()) {
      feature.insert_or_assign("pypi-options", std::move(options));
    }
    feature.insert_or_assign("system-requirements", system_requirements());
    feature.insert_or_assign("activation", activation());
    if (auto tasks = passthrough_table(manifest_, "tasks"); !tasks.empty()) {
      feature.insert_or_assign("tasks", std::move(tasks));
    }

    toml::array channels{"conda-forge"};
    const auto workspace = passthrough_table(manifest_, "workspace");
    if (const auto* extra = workspace["channels"].as_array()) {
      for (const auto& c : *extra) {
        const auto name = c.value_exact<std::string>();
        const bool known = std::any_of(channels.begin(), channels.end(), [&](const auto& have) {
          return have.template value_exact<std::string>() == name;
        });
        if (name && !known) channels.push_back(*name);
      }
    }
    toml::table& pixi = out_.pixi_manifest;
    pixi.insert_or_assign("workspace", toml::table{{"name", "comfy-env-" + out_.env_name},
                                                   {"version", "0.1.0"},
                                                   {"channels", std::move(channels)},
                                                   {"platforms", toml::array{platform_.pixi}}});
    pixi.insert_or_assign("feature", toml::table{{"node", std::move(feature)}});
    pixi.insert_or_assign("environments",
                          toml::table{{"default", toml::table{{"features", toml::array{"node"}},
                                                              {"no-default-feature", true}}}});

    std::ostringstream text;
    text << pixi;
    support::sha256 hash;
    hash.update(text.str());
    hash.update("\n--requirements--\n");
    for (const auto& line : out_.requirements) hash.update(line + "\n");
    out_.identity = "orch1:" + hash.hex_digest();
    return std::move(out_);
  }

 private:
  // Drops the torch family from a dependency table, with a note for each.
  void strip_torch(toml::table& table, const std::string& where) {
    std::vector<std::string> dropped;
    for (const auto& [k, v] : table) {
      if (is_torch_family(k.str())) dropped.emplace_back(k.str());
    }
    for (const auto& name : dropped) {
      table.erase(name);
      out_.notes.push_back("ignoring `" + name + "` in " + where + ": the torch family is " +
                           "pinned to the host's (" + abi_tag(stack_) + ")");
    }
  }

  // Adds a table's entries as pip requirements (entries of this platform only).
  void add_requirements(const toml::table& pypi) {
    for (const auto& [k, v] : pypi) {
      std::string why;
      std::string line = requirement_of(std::string(k.str()), v, config_dir_, why);
      // A requirements file obeys option lines: nothing that could be one is ever written
      // (the manifest's reader refused it already; docs/security.md).
      const bool unprintable = std::any_of(line.begin(), line.end(), [](unsigned char c) {
        return c < 0x20 || c > 0x7e;  // pip's splitlines() also splits on U+0085, U+2028, U+2029
      });
      if (unprintable || line.rfind('-', 0) == 0) {
        why = "not a requirement pip can be given safely";
        line.clear();
      }
      if (line.empty()) {
        out_.untranslatable.push_back(std::string(k.str()) + ": " + why);
      } else {
        out_.requirements.push_back(line);
      }
    }
  }

  toml::table conda_dependencies() {
    toml::table deps{{"python", out_.python + ".*"}, {"pip", "*"}, {"setuptools", ">=75.0,<82"}};
    auto pack = passthrough_table(manifest_, "dependencies");
    strip_torch(pack, "[dependencies]");
    for (const auto& [k, v] : pack) {
      if (k.str() != "python" && k.str() != "pip" && k.str() != "setuptools") {
        out_.conda_packages.emplace_back(k.str());
      }
      deps.insert_or_assign(k, v);
    }
    return deps;
  }

  toml::table pypi_dependencies() {
    toml::table pypi;
    if (const auto pin = torch_pin(stack_)) pypi.insert_or_assign("torch", *pin);
    if (const auto pin = torchvision_pin(stack_)) pypi.insert_or_assign("torchvision", *pin);
    if (const auto pin = torchaudio_pin(stack_)) pypi.insert_or_assign("torchaudio", *pin);
    auto pack = passthrough_table(manifest_, "pypi-dependencies");
    strip_torch(pack, "[pypi-dependencies]");
    add_requirements(pack);
    for (const auto& [k, v] : pack) pypi.insert_or_assign(k, v);
    const bool cuda_torch = stack_.accelerator.rfind("cu", 0) == 0;
    for (const auto& wheel : manifest_.cuda_packages) {
      if (is_torch_family(wheel)) {
        out_.notes.push_back("ignoring `" + wheel +
                             "` in [cuda] packages: the torch family is "
                             "pinned to the host's (" +
                             abi_tag(stack_) + ")");
      } else if (!cuda_torch) {
        out_.notes.push_back("skipping the [cuda] wheel `" + wheel + "`: the host's torch (" +
                             abi_tag(stack_) + ") has no CUDA");
      } else {
        pypi.insert_or_assign(wheel, "*");
        out_.requirements.push_back(wheel);
      }
    }
    return pypi;
  }

  // Every platform's tables are kept (pixi ignores platforms it does not build for); this
  // platform's also feed the pip requirements and the conda package list.
  toml::table target_tables() {
    auto targets = passthrough_table(manifest_, "target");
    for (auto& [platform, node] : targets) {
      auto* tables = node.as_table();
      if (tables == nullptr) continue;
      const std::string name(platform.str());
      for (const char* kind : {"dependencies", "pypi-dependencies"}) {
        auto* table = (*tables)[kind].as_table();
        if (table == nullptr) continue;
        strip_torch(*table, "[target." + name + "." + kind + "]");
        if (name != platform_.pixi) continue;
        if (std::string_view(kind) == "pypi-dependencies") {
          add_requirements(*table);
        } else {
          for (const auto& [k, v] : *table) out_.conda_packages.emplace_back(k.str());
        }
      }
    }
    return targets;
  }

  toml::table system_requirements() {
    auto pack = passthrough_table(manifest_, "system-requirements");
    if (!pack.empty() || platform_.glibc.empty()) return pack;
    return toml::table{{"libc", toml::table{{"family", "glibc"}, {"version", platform_.glibc}}}};
  }

  // The pack's [activation] merged; the one key the builder sets wins on a collision, as in
  // comfy-env (ADR-0013).
  toml::table activation() {
    auto table = passthrough_table(manifest_, "activation");
    if (!table["env"].is_table()) table.insert_or_assign("env", toml::table{});
    table["env"].as_table()->insert_or_assign("KMP_DUPLICATE_LIB_OK", "TRUE");
    return table;
  }

  const env_manifest& manifest_;
  const host_stack& stack_;
  const target_platform& platform_;
  const fs::path& config_dir_;
  env_derivation out_;
};

}  // namespace

target_platform this_platform() {
  target_platform p;
#if defined(__aarch64__)
  p.pixi = "linux-aarch64";
#else
  p.pixi = "linux-64";
#endif
  p.glibc = gnu_get_libc_version();
  return p;
}

env_derivation derive_env(const std::string& env_name, const env_manifest& manifest,
                          const host_stack& stack, const target_platform& platform,
                          const fs::path& config_dir) {
  return deriver(env_name, manifest, stack, platform, config_dir).run();
}

std::string pixi_toml_text(const env_derivation& derivation, const fs::path& source) {
  std::ostringstream out;
  out << "# Generated by comfy-orch -- DO NOT EDIT.\n# Source: " << source.string() << " (env '"
      << derivation.env_name << "'). Fix errors there.\n"
      << derivation.pixi_manifest << '\n';
  return out.str();
}

std::string requirements_text(const env_derivation& derivation) {
  std::string text = "# Generated by comfy-orch for env '" + derivation.env_name + "'.\n";
  for (const auto& line : derivation.requirements) text += line + "\n";
  return text;
}

}  // namespace orch::manifests
