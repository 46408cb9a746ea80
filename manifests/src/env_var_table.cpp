#include "env_var_table.hpp"

#include <algorithm>

#include "orch/manifests/toml_source.hpp"

namespace orch::manifests::detail {

std::vector<std::pair<std::string, std::string>> read_env_var_table(const toml::node& value,
                                                                    const std::string& file,
                                                                    diagnostics& diags) {
  std::vector<std::pair<std::string, std::string>> vars;
  const auto* table = value.as_table();
  if (table == nullptr) {
    diags.error(position_of(file, value), "env_vars", "expected a table, got " + describe(value),
                "write [env_vars] with NAME = \"value\" lines");
    return vars;
  }
  for (const auto& [k, v] : *table) {
    const std::string name(k.str());
    const std::string key = "env_vars." + name;
    const auto pos = position_of(file, v, &value);
    if (name.empty() || name.find('=') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      diags.error(pos, key, "not a valid environment variable name",
                  "use a name without '=' such as MY_VAR");
      continue;
    }
    if (auto text = scalar_to_string(v)) {
      vars.emplace_back(name, std::move(*text));
    } else {
      diags.error(pos, key, "expected a string, integer, float or boolean, got " + describe(v),
                  "write the value as a string, e.g. " + name + " = \"...\"");
    }
  }
  // toml++ keeps keys sorted; a process environment is built in the order the file wrote.
  std::stable_sort(vars.begin(), vars.end(), [&](const auto& a, const auto& b) {
    return table->get(a.first)->source().begin < table->get(b.first)->source().begin;
  });
  return vars;
}

}  // namespace orch::manifests::detail
