#include "orch/manifests/env_manifest.hpp"

#include <sstream>
#include <string_view>

#include "dependency_entries.hpp"
#include "env_var_table.hpp"
#include "name_list.hpp"
#include "orch/manifests/device_spec.hpp"
#include "orch/manifests/toml_source.hpp"

namespace orch::manifests {
namespace {

// docs/references.md, comfy-env §2.2, bucket 2: handed to the environment builder as written.
constexpr detail::name_list<7> passthrough_tables = {
    "dependencies", "pypi-dependencies",   "target", "activation",
    "pypi-options", "system-requirements", "tasks"};

// Sections of comfy-env-root.toml; comfy-env refuses them in an env file, we warn and ignore.
constexpr detail::name_list<4> root_only_tables = {"node_reqs", "node_packs", "settings", "types"};

std::string serialise(std::string_view key, const toml::node& node) {
  toml::table wrapper;
  wrapper.insert(key, node);
  std::ostringstream out;
  out << wrapper;
  return out.str();
}

class env_parser {
 public:
  env_parser(const toml::table& root, const std::filesystem::path& file, diagnostics& diags)
      : root_(root), file_(file.string()), diags_(diags) {
    manifest_.file = file;
  }

  env_manifest run() {
    for (const auto& [key_node, value] : root_) {
      const std::string_view key = key_node.str();
      const auto where = position_of(file_, value, &root_);
      if (key == "schema") {
        read_schema(value, where);
      } else if (key == "python") {
        read_python(value, where);
      } else if (key == "cuda") {
        read_cuda(value, where);
      } else if (key == "env_vars") {
        read_env_vars(value);
      } else if (key == "options") {
        read_options(value, where);
      } else if (key == "worker") {
        read_worker(value, where);
      } else if (key == "workspace") {
        read_workspace(value, where);
      } else if (detail::contains(passthrough_tables, key)) {
        check_dependencies(key, value);
        manifest_.passthrough.emplace(std::string(key), serialise(key, value));
      } else if (key == "environments" || key == "feature") {
        diags_.error(where, "[" + std::string(key) + "]",
                     "would break environment materialisation: comfy-env composes each node "
                     "directory's environment itself, from one default feature",
                     "move its contents into the top-level [dependencies], "
                     "[pypi-dependencies] or [target.<platform>.*] tables and remove [" +
                         std::string(key) + "]");
      } else if (detail::contains(root_only_tables, key)) {
        diags_.warning(where, "[" + std::string(key) + "]",
                       "root-only section in an env file (comfy-env refuses it here); "
                       "comfy-orch ignores it",
                       "move it to comfy-env-root.toml at the pack root");
      } else {
        warn_unknown_section(key, value.is_table(), where);
      }
    }
    return std::move(manifest_);
  }

 private:
  // The entries that become requirement lines: top-level and per platform (target.<p>.*).
  void check_dependencies(std::string_view key, const toml::node& value) {
    const auto* table = value.as_table();
    if (table == nullptr) return;
    if (key == "dependencies" || key == "pypi-dependencies") {
      detail::check_dependency_table(*table, key, file_, diags_);
    } else if (key == "target") {
      for (const auto& [platform, tables] : *table) {
        const auto* per_platform = tables.as_table();
        if (per_platform == nullptr) continue;
        for (const char* kind : {"dependencies", "pypi-dependencies"}) {
          if (const auto* deps = (*per_platform)[kind].as_table())
            detail::check_dependency_table(
                *deps, "target." + std::string(platform.str()) + "." + kind, file_, diags_);
        }
      }
    }
  }

  void warn_unknown_section(std::string_view key, bool is_table, const source_position& where) {
    const std::string what = is_table ? "[" + std::string(key) + "]" : std::string(key);
    std::string message = std::string(is_table ? "section" : "top-level key") +
                          " is not part of the comfy-env.toml schema (it comes from an earlier "
                          "layout); comfy-orch ignores it";
    std::string fix = "remove it, or move its contents to the current schema";
    if (key == "apt" || key == "brew" || key == "system") {
      message = "system packages are not installed by comfy-env or comfy-orch; ignored";
      fix = "install them with the OS package manager, or use [system-requirements]";
    } else if (key == "serializers") {
      message = "[serializers] was removed from comfy-env (ADR-0013); ignored";
      fix = "remove it";
    }
    diags_.warning(where, what, std::move(message), std::move(fix));
  }

  void read_schema(const toml::node& value, const source_position& where) {
    const auto schema = value.value_exact<std::int64_t>();
    if (!schema) {
      diags_.error(where, "schema", "expected the integer 1, got " + describe(value),
                   "write schema = 1, or remove the key (absent means 1)");
    } else if (*schema != 1) {
      diags_.error(where, "schema",
                   "schema " + std::to_string(*schema) + " is not supported (only 1 is)",
                   "write schema = 1, or remove the key (absent means 1)");
    } else {
      manifest_.schema = 1;
    }
  }

  void read_python(const toml::node& value, const source_position& where) {
    if (const auto text = value.value_exact<std::string>()) {
      manifest_.python = *text;
      return;
    }
    std::string message = "expected a string such as \"3.11\", got " + describe(value);
    if (value.is_floating_point()) {
      message += ": an unquoted version is a TOML float, so 3.10 would silently become 3.1";
    }
    diags_.error(where, "python", std::move(message), "quote the version: python = \"3.11\"");
  }

  void read_cuda(const toml::node& value, const source_position& where) {
    const auto* table = value.as_table();
    if (table == nullptr) {
      diags_.error(where, "cuda", "expected a table, got " + describe(value),
                   "write [cuda] with packages = [\"...\"]");
      return;
    }
    for (const auto& [k, v] : *table) {
      const auto pos = position_of(file_, v, &value);
      if (k.str() != "packages") {
        diags_.warning(pos, "cuda." + std::string(k.str()),
                       "unrecognized key '" + std::string(k.str()) +
                           "' in [cuda] (known: packages); comfy-orch ignores it",
                       "list the package in packages = [...]");
        continue;
      }
      if (const auto one = v.value_exact<std::string>()) {
        manifest_.cuda_packages.push_back(*one);
      } else if (const auto* list = v.as_array()) {
        for (const auto& item : *list) {
          if (const auto s = item.value_exact<std::string>()) {
            manifest_.cuda_packages.push_back(*s);
          } else {
            diags_.error(position_of(file_, item, &v), "cuda.packages",
                         "expected package names as strings, got " + describe(item),
                         "quote each package name");
          }
        }
      } else {
        diags_.error(pos, "cuda.packages",
                     "expected a string or an array of strings, got " + describe(v),
                     "write packages = [\"name\", ...]");
      }
    }
  }

  void read_env_vars(const toml::node& value) {
    manifest_.env_vars = detail::read_env_var_table(value, file_, diags_);
  }

  void read_options(const toml::node& value, const source_position& where) {
    const auto* table = value.as_table();
    if (table == nullptr) {
      diags_.error(where, "options", "expected a table, got " + describe(value),
                   "write [options] with health_check_timeout = 5.0");
      return;
    }
    for (const auto& [k, v] : *table) {
      const std::string name(k.str());
      const auto pos = position_of(file_, v, &value);
      std::optional<double>* target = nullptr;
      if (name == "health_check_timeout") target = &manifest_.options.health_check_timeout_s;
      if (name == "call_timeout") target = &manifest_.options.call_timeout_s;
      if (target == nullptr) {
        diags_.warning(pos, "options." + name,
                       "unrecognized key '" + name +
                           "' in [options] (known: health_check_timeout, call_timeout); "
                           "comfy-orch ignores it");
        continue;
      }
      const auto seconds = v.value<double>();  // integers convert
      if (!seconds || !(v.is_integer() || v.is_floating_point()) || *seconds <= 0) {
        diags_.error(pos, "options." + name,
                     "expected a positive number of seconds, got " + describe(v),
                     "write " + name + " = 5.0");
        continue;
      }
      *target = *seconds;
    }
  }

  void read_worker(const toml::node& value, const source_position& where) {
    const auto* table = value.as_table();
    if (table == nullptr) {
      diags_.error(where, "worker", "expected a table, got " + describe(value),
                   "write [worker] with library = \"libmy_nodes.so\"");
      return;
    }
    for (const auto& [k, v] : *table) {
      const std::string name(k.str());
      const auto pos = position_of(file_, v, &value);
      if (name == "library" || name == "device") {
        const auto text = v.value_exact<std::string>();
        if (!text || text->empty()) {
          diags_.error(pos, "worker." + name, "expected a non-empty string, got " + describe(v),
                       name == "library" ? "write library = \"libmy_nodes.so\""
                                         : "write device = \"cpu\" (or sim, cuda:N, hip:N)");
        } else if (name == "device" && !parse_device_spec(*text)) {
          diags_.error(pos, "worker.device", "unknown device \"" + *text + "\"",
                       "use cpu, sim, cuda:N or hip:N");
        } else {
          (name == "library" ? manifest_.worker.library : manifest_.worker.device) = *text;
        }
        continue;
      }
      diags_.warning(
          pos, "worker." + name,
          "unrecognized key '" + name +
              "' in [worker] (known: library, device); comfy-orch ignores it" +
              (name == "package" ? " (a comfyui-isolation era Python worker package)" : ""));
    }
  }

  void read_workspace(const toml::node& value, const source_position& where) {
    const auto* table = value.as_table();
    if (table == nullptr) {
      diags_.error(where, "workspace", "expected a table, got " + describe(value),
                   "write [workspace] with channels = [...]");
      return;
    }
    toml::table kept;
    for (const auto& [k, v] : *table) {
      const std::string name(k.str());
      const auto pos = position_of(file_, v, &value);
      if (name == "channels") {
        kept.insert(k, v);
      } else if (name == "name" || name == "version" || name == "platforms") {
        diags_.error(pos, "workspace." + name,
                     "would break environment materialisation: the environment builder owns "
                     "the workspace's " +
                         name,
                     "remove workspace." + name + " (only workspace.channels is merged)");
      } else {
        diags_.warning(pos, "workspace." + name,
                       "only workspace.channels is merged into the environment; comfy-orch "
                       "ignores workspace." +
                           name);
      }
    }
    if (!kept.empty()) manifest_.passthrough.emplace("workspace", serialise("workspace", kept));
  }

  const toml::table& root_;
  std::string file_;
  diagnostics& diags_;
  env_manifest manifest_;
};

}  // namespace

env_manifest parse_env_manifest(const toml::table& root, const std::filesystem::path& file,
                                diagnostics& diags) {
  return env_parser(root, file, diags).run();
}

std::optional<env_manifest> load_env_manifest(const std::filesystem::path& file,
                                              diagnostics& diags) {
  auto table = parse_toml_file(file, diags);
  if (!table) return std::nullopt;
  return parse_env_manifest(*table, file, diags);
}

}  // namespace orch::manifests
