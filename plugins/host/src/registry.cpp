#include "orch/plugins/registry.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <system_error>
#include <tuple>

#include "orch/plugins/abi_adapters.hpp"
#include "orch/plugins/errc.hpp"
#include "orch/plugins/loader.hpp"
#include "orch/plugins/names.hpp"

namespace orch::plugins {
namespace fs = std::filesystem;

namespace {

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out.empty() ? "-" : out;
}

}  // namespace

bool named_like_a_plugin(const fs::path& file) {
  const std::string name = file.filename().string();
  return name.size() > 8 && (name.rfind("orch-", 0) == 0 || name.rfind("orch_", 0) == 0) &&
         file.extension() == ".so";
}

registry_report scan_directories(const std::vector<fs::path>& directories) {
  registry_report report;
  report.directories = directories;
  for (const auto& dir : directories) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) {
      report.skipped.push_back({dir, "not_found",
                                dir.string() + ": plugin directory not found; fix the path"});
      continue;
    }
    if (!fs::is_directory(dir, ec)) {
      report.skipped.push_back({dir, plugin_errc::not_a_directory,
                                dir.string() + ": is not a directory; a plugin search path names "
                                               "the directory that holds orch-*.so files"});
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".so") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      if (!named_like_a_plugin(file)) {
        report.skipped.push_back({file, plugin_errc::not_plugin_name,
                                  file.string() + ": not loaded: plugins are named orch-*.so"});
        continue;
      }
      auto lib = plugin_library::open(file, /*announce=*/false);
      if (!lib) {
        report.skipped.push_back({file, lib.err().code, lib.err().message});
        continue;
      }
      const orch_plugin_table& t = (*lib)->table();
      report.plugins.push_back({file, (*lib)->real_path(), t.name, kind_name(t.kind),
                                backend_name(t.backend), t.version, t.abi_major, t.abi_minor,
                                t.min_level, t.max_level, t.capabilities});
    }
  }
  std::stable_sort(report.plugins.begin(), report.plugins.end(), [](const auto& a, const auto& b) {
    return std::tie(a.kind, a.backend, a.name) < std::tie(b.kind, b.backend, b.name);
  });
  return report;
}

nlohmann::json to_json(const registry_report& report) {
  nlohmann::json j;
  j["directories"] = nlohmann::json::array();
  for (const auto& d : report.directories) j["directories"].push_back(d.string());
  j["plugins"] = nlohmann::json::array();
  for (const auto& p : report.plugins) {
    j["plugins"].push_back({{"name", p.name},
                            {"kind", p.kind},
                            {"backend", p.backend},
                            {"version", p.version},
                            {"abi", std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor)},
                            {"min_level", p.min_level},
                            {"max_level", p.max_level},
                            {"capabilities", capability_names(p.capabilities)},
                            {"capability_bits", p.capabilities},
                            {"path", p.path.string()},
                            {"real_path", p.real_path.string()}});
  }
  j["skipped"] = nlohmann::json::array();
  for (const auto& s : report.skipped)
    j["skipped"].push_back({{"path", s.path.string()}, {"code", s.code}, {"message", s.message}});
  return j;
}

result<std::vector<plugin_entry>> plugins_from_json(const nlohmann::json& j) {
  const auto bad = [](std::size_t i, const std::string& why) {
    return error{plugin_errc::bad_plugin_list, "plugin entry " + std::to_string(i) + " " + why};
  };
  if (!j.is_object() || !j.contains("plugins") || !j["plugins"].is_array()) {
    return error{plugin_errc::bad_plugin_list, "no \"plugins\" array"};
  }
  std::vector<plugin_entry> out;
  const auto& list = j["plugins"];
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& p = list[i];
    if (!p.is_object()) return bad(i, "is not an object");
    plugin_entry e;
    for (auto [key, target] : {std::pair{"name", &e.name}, std::pair{"kind", &e.kind},
                               std::pair{"backend", &e.backend}, std::pair{"version", &e.version}}) {
      if (!p.contains(key) || !p[key].is_string()) return bad(i, std::string("lacks ") + key);
      *target = p[key].get<std::string>();
    }
    for (auto [key, target] : {std::pair{"path", &e.path}, std::pair{"real_path", &e.real_path}}) {
      if (!p.contains(key) || !p[key].is_string()) return bad(i, std::string("lacks ") + key);
      *target = p[key].get<std::string>();
    }
    for (auto [key, target] :
         {std::pair{"min_level", &e.min_level}, std::pair{"max_level", &e.max_level}}) {
      if (!p.contains(key) || !p[key].is_number_unsigned()) return bad(i, std::string("lacks ") + key);
      *target = static_cast<uint32_t>(std::min<uint64_t>(p[key].get<uint64_t>(), 0xFFFFFFFFu));
    }
    if (!p.contains("capability_bits") || !p["capability_bits"].is_number_unsigned()) {
      return bad(i, "lacks capability_bits");
    }
    e.capabilities = p["capability_bits"].get<uint64_t>();
    if (!p.contains("abi") || !p["abi"].is_string() ||
        std::sscanf(p["abi"].get<std::string>().c_str(), "%u.%u", &e.abi_major, &e.abi_minor) != 2) {
      return bad(i, "lacks abi");
    }
    // What the host's own loader would have refused (validate_table) is refused here too.
    const bool known_kind = e.kind == "pager" || e.kind == "allocator" || e.kind == "backend";
    const bool known_backend =
        e.backend == "cpu" || e.backend == "sim" || e.backend == "cuda" || e.backend == "hip";
    if (!known_kind || !known_backend || e.name.empty() || e.min_level < 1 || e.max_level > 4 ||
        e.min_level > e.max_level || adapter_for(e.abi_major) == nullptr) {
      return bad(i, "(" + e.name + ") is not a plugin this host can use");
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::string format_table(const registry_report& report) {
  std::ostringstream out;
  out << "KIND       BACKEND  NAME                     VERSION    LEVELS  CAPABILITIES\n";
  for (const auto& p : report.plugins) {
    char line[512];
    std::snprintf(line, sizeof line, "%-10s %-8s %-24s %-10s L%u-L%u   %s\n", p.kind.c_str(),
                  p.backend.c_str(), p.name.c_str(), p.version.c_str(), p.min_level, p.max_level,
                  join(capability_names(p.capabilities)).c_str());
    out << line;
  }
  if (report.plugins.empty()) out << "(no plugins found)\n";
  if (!report.skipped.empty()) {
    out << "\nskipped:\n";
    for (const auto& s : report.skipped) out << "  [" << s.code << "] " << s.message << "\n";
  }
  return out.str();
}

std::vector<fs::path> plugin_directories(const std::vector<std::string>& explicit_dirs,
                                         const fs::path& fallback) {
  std::vector<fs::path> dirs(explicit_dirs.begin(), explicit_dirs.end());
  if (!dirs.empty()) return dirs;
  if (const char* env = std::getenv(plugin_path_variable); env != nullptr && env[0] != '\0') {
    return split_plugin_path(env, {});
  }
  return {fallback};
}

std::vector<fs::path> split_plugin_path(const std::string& value, const fs::path& base) {
  std::vector<fs::path> dirs;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t colon = std::min(value.find(':', start), value.size());
    if (colon > start) {
      const fs::path p(value.substr(start, colon - start));
      dirs.push_back(p.is_absolute() || base.empty() ? p : (base / p).lexically_normal());
    }
    start = colon + 1;
  }
  return dirs;
}

}  // namespace orch::plugins
