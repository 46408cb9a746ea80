// Reading an [env_vars] table, shared by comfy-env.toml and the legacy root-file section.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "orch/manifests/diagnostic.hpp"

namespace orch::manifests::detail {

// Values may be strings, integers, floats or booleans and are stored as strings (booleans as
// "1"/"0"); anything else, or a name containing '=', is an error naming the key.
std::vector<std::pair<std::string, std::string>> read_env_var_table(const toml::node& value,
                                                                    const std::string& file,
                                                                    diagnostics& diags);

}  // namespace orch::manifests::detail
