// dependency_entries: the checks every [dependencies] and [pypi-dependencies] entry of a
// comfy-env.toml passes when the manifest is read (docs/security.md, "Manifests"). Their names
// and versions become lines of a pip/uv requirements file and a pixi manifest: a newline would
// start a new line ("--index-url http://…", an option pip obeys), and a value starting with "-"
// is an option too. Each refusal names the file, line and key.
#pragma once

#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "orch/manifests/diagnostic.hpp"

namespace orch::manifests::detail {

// Checks the entries of `table`, written as `section` ("pypi-dependencies",
// "target.linux-64.dependencies", ...) in `file`.
void check_dependency_table(const toml::table& table, std::string_view section,
                            const std::string& file, diagnostics& diags);

}  // namespace orch::manifests::detail
