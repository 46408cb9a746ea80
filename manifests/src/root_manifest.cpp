#include "orch/manifests/root_manifest.hpp"

#include <string_view>

#include "env_var_table.hpp"
#include "name_list.hpp"
#include "orch/manifests/toml_source.hpp"

namespace orch::manifests {
namespace {

// Sections a root file carried before comfy-env made the schema closed (2026-08); comfy-env now
// refuses them, comfy-orch reads the file and says what it does with each.
constexpr detail::name_list<8> legacy_ignored = {
    "apt", "brew", "cuda", "dependencies", "pypi-dependencies", "target", "python", "nodes"};

// [settings] keys of the Aug-18 era (docs/references.md, comfy-env §2.1).
constexpr detail::name_list<5> known_settings = {"isolate", "install_isolated", "auto_install",
                                                 "pool_ipc", "worker_vram_budget"};

class root_parser {
 public:
  root_parser(const toml::table& root, const std::filesystem::path& file, diagnostics& diags)
      : root_(root), file_(file.string()), diags_(diags) {
    manifest_.file = file;
  }

  root_manifest run() {
    for (const auto& [key_node, value] : root_) {
      const std::string key(key_node.str());
      const auto where = position_of(file_, value, &root_);
      if (key == "node_reqs" || key == "node_packs") {
        if (key == "node_packs") {
          // comfy-env 0.4.25+ spelling; older comfy-env refuses the whole file because of it.
          diags_.note(where, "[node_packs]",
                      "newer layout (comfy-env 0.4.25+); read like [node_reqs]");
        }
        read_requirements(key, value, where);
      } else if (key == "settings") {
        read_settings(value, where);
      } else if (key == "types") {
        read_types(value, where);
      } else if (key == "env_vars") {
        diags_.warning(where, "[env_vars]",
                       "legacy section in a root file (comfy-env refuses it since 2026-08); "
                       "comfy-orch applies it to every worker of this pack, under each env's own "
                       "[env_vars]",
                       "move it to the env's nodes/comfy-env.toml");
        manifest_.legacy_env_vars = detail::read_env_var_table(value, file_, diags_);
      } else if (detail::contains(legacy_ignored, key)) {
        diags_.warning(where, "[" + key + "]",
                       "legacy section in a root file (comfy-env refuses it since 2026-08); "
                       "comfy-orch ignores it",
                       "move it to the env's nodes/comfy-env.toml");
      } else {
        diags_.warning(where, "[" + key + "]",
                       "unknown section in a root file (known: node_reqs, node_packs, settings, "
                       "types); comfy-orch ignores it");
      }
    }
    return std::move(manifest_);
  }

 private:
  void read_requirements(const std::string& section, const toml::node& value,
                         const source_position& where) {
    const auto* table = value.as_table();
    if (table == nullptr) {
      diags_.error(where, section, "expected a table, got " + describe(value),
                   "write [" + section + "] with Pack = \"owner/repo\" lines");
      return;
    }
    for (const auto& [k, v] : *table) {
      node_requirement req{std::string(k.str()), section, std::nullopt, {}};
      const auto pos = position_of(file_, v, &value);
      if (const auto text = v.value_exact<std::string>()) {
        req.source = *text;
      } else if (const auto* fields = v.as_table()) {
        for (const auto& [fk, fv] : *fields) {
          if (auto s = scalar_to_string(fv)) {
            req.fields.emplace(std::string(fk.str()), std::move(*s));
          } else {
            diags_.error(position_of(file_, fv, &v),
                         section + "." + req.name + "." + std::string(fk.str()),
                         "expected a string, got " + describe(fv),
                         "write e.g. { github = \"owner/repo\", tag = \"v1.0\" }");
          }
        }
      } else {
        diags_.error(pos, section + "." + req.name,
                     "expected \"owner/repo\" or a table such as { github = \"owner/repo\", tag "
                     "= \"v1.0\" }, got " +
                         describe(v),
                     "write " + req.name + " = \"owner/repo\"");
        continue;
      }
      manifest_.requirements.push_back(std::move(req));
    }
  }

  void read_settings(const toml::node& value, const source_position& where) {
    const auto* table = value.as_table();
    if (table == nullptr) {
      diags_.error(where, "settings", "expected a table, got " + describe(value),
                   "write [settings] with key = value lines");
      return;
    }
    for (const auto& [k, v] : *table) {
      const std::string name(k.str());
      const auto pos = position_of(file_, v, &value);
      if (!detail::contains(known_settings, name)) {
        diags_.warning(pos, "settings." + name,
                       "unrecognized key '" + name +
                           "' in [settings] (known: isolate, install_isolated, auto_install, "
                           "pool_ipc, worker_vram_budget); comfy-orch ignores it");
        continue;
      }
      if (auto s = scalar_to_string(v)) {
        manifest_.settings.emplace_back(name, std::move(*s));
      } else {
        diags_.error(pos, "settings." + name,
                     "expected a boolean, number or string, got " + describe(v),
                     "write " + name + " = true");
      }
    }
  }

  void read_types(const toml::node& value, const source_position& where) {
    const auto* table = value.as_table();
    if (table == nullptr) {
      diags_.error(where, "types", "expected a table, got " + describe(value),
                   "write [types] with SOCKET = \"builtin\" or \"custom\" lines");
      return;
    }
    for (const auto& [k, v] : *table) {
      const std::string name(k.str());
      const auto text = v.value_exact<std::string>();
      if (text && (*text == "builtin" || *text == "custom")) {
        manifest_.types.emplace(name,
                                *text == "builtin" ? socket_kind::builtin : socket_kind::custom);
        continue;
      }
      diags_.error(position_of(file_, v, &value), "types." + name,
                   "expected \"builtin\" or \"custom\", got " + describe(v),
                   "write " + name +
                       " = \"custom\" for a socket type this pack defines, or "
                       "\"builtin\" for one ComfyUI defines");
    }
  }

  const toml::table& root_;
  std::string file_;
  diagnostics& diags_;
  root_manifest manifest_;
};

}  // namespace

root_manifest parse_root_manifest(const toml::table& root, const std::filesystem::path& file,
                                  diagnostics& diags) {
  return root_parser(root, file, diags).run();
}

std::optional<root_manifest> load_root_manifest(const std::filesystem::path& file,
                                                diagnostics& diags) {
  auto table = parse_toml_file(file, diags);
  if (!table) return std::nullopt;
  return parse_root_manifest(*table, file, diags);
}

}  // namespace orch::manifests
