#include "orch/ipc/cgroup_probe.hpp"
#include "orch/ipc/errc.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "saturating.hpp"

namespace orch::ipc {
namespace fs = std::filesystem;
namespace {

constexpr std::uint64_t v1_unlimited = std::uint64_t{1} << 62;

using detail::saturating_add;

// /proc reports KiB; a garbled or hostile value must not wrap into a small byte count.
std::uint64_t kib_to_bytes(std::uint64_t kib) noexcept {
  return detail::saturating_mul(kib, 1024);
}

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

std::optional<std::uint64_t> parse_u64(const std::string& text) {
  std::uint64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// The limit one directory sets, if any.
std::optional<std::uint64_t> limit_in(const fs::path& dir) {
  if (auto v2 = read_text(dir / "memory.max")) {
    const std::string value = trim(*v2);
    if (value == "max") return std::nullopt;
    return parse_u64(value);  // a negative or garbled value parses as none
  }
  if (auto v1 = read_text(dir / "memory.limit_in_bytes")) {
    auto value = parse_u64(trim(*v1));
    if (value && *value < v1_unlimited) return value;
  }
  return std::nullopt;
}

// `dir` and its parents up to and including `mount`, nearest first. A path that leaves the mount
// (e.g. through "..") yields nothing.
std::vector<fs::path> walk_up(const fs::path& mount, const std::string& cgroup_path) {
  std::vector<fs::path> dirs;
  std::string relative = cgroup_path;
  while (!relative.empty() && relative.front() == '/') relative.erase(0, 1);
  fs::path dir = (mount / relative).lexically_normal();
  const fs::path normal_mount = mount.lexically_normal();
  const auto rel = dir.lexically_relative(normal_mount);
  if (rel.empty() || *rel.begin() == "..") return dirs;
  while (true) {
    dirs.push_back(dir);
    if (dir == normal_mount || !dir.has_parent_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
  return dirs;
}

}  // namespace

result<std::uint64_t> read_meminfo(const fs::path& root, const std::string& key) {
  auto text = read_text(root / "proc/meminfo");
  if (!text) return error{proc_errc::no_meminfo, "cannot read " + (root / "proc/meminfo").string()};
  std::istringstream lines(*text);
  const std::string prefix = key + ":";
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream fields(line.substr(prefix.size()));
    std::uint64_t kib = 0;
    if (fields >> kib) return kib_to_bytes(kib);
  }
  return error{proc_errc::no_meminfo,
               "no " + key + " line in " + (root / "proc/meminfo").string()};
}

result<std::uint64_t> read_physical_ram(const fs::path& root) {
  return read_meminfo(root, "MemTotal");
}

std::optional<std::uint64_t> find_cgroup_limit(const fs::path& root, std::uint64_t physical_ram) {
  const fs::path v2_root = root / "sys/fs/cgroup";
  const fs::path v1_root = root / "sys/fs/cgroup/memory";
  std::vector<fs::path> dirs;
  if (auto text = read_text(root / "proc/self/cgroup")) {
    std::istringstream lines(*text);
    std::string line;
    while (std::getline(lines, line)) {
      const auto first = line.find(':');
      const auto second = first == std::string::npos ? first : line.find(':', first + 1);
      if (second == std::string::npos) continue;
      const std::string controllers = line.substr(first + 1, second - first - 1);
      const std::string path = trim(line.substr(second + 1));
      bool memory = false;
      std::istringstream list(controllers);
      for (std::string c; std::getline(list, c, ',');) memory = memory || c == "memory";
      if (controllers.empty()) {
        for (auto& d : walk_up(v2_root, path)) dirs.push_back(d);
      } else if (memory) {
        for (auto& d : walk_up(v1_root, path)) dirs.push_back(d);
      }
    }
  }
  dirs.push_back(v2_root.lexically_normal());
  dirs.push_back(v1_root.lexically_normal());
  std::optional<std::uint64_t> smallest;
  for (const auto& dir : dirs) {
    if (auto limit = limit_in(dir); limit && (!smallest || *limit < *smallest)) smallest = limit;
  }
  if (smallest && *smallest >= physical_ram) return std::nullopt;
  return smallest;
}

std::uint64_t read_swap_total(const fs::path& root) {
  auto text = read_text(root / "proc/swaps");
  if (!text) return 0;
  std::istringstream lines(*text);
  std::string line;
  std::getline(lines, line);  // header
  std::uint64_t total = 0;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    std::vector<std::string> fields;
    for (std::string f; in >> f;) fields.push_back(f);
    if (fields.size() < 5) continue;
    // Filename, type, size (KiB), used, priority; split from the right, like ComfyUI's rsplit.
    std::string filename = fields[0];
    for (std::size_t i = 1; i + 4 < fields.size(); ++i) filename += " " + fields[i];
    const auto size_kib = parse_u64(fields[fields.size() - 3]);
    if (!size_kib) continue;
    // Resolve links inside the probed tree: /dev/mapper/x may point at a zram device.
    std::error_code ec;
    fs::path resolved = fs::canonical(root / fs::path(filename).relative_path(), ec);
    const std::string base =
        ec ? fs::path(filename).filename().string() : resolved.filename().string();
    if (base.rfind("zram", 0) == 0) continue;
    total = saturating_add(total, kib_to_bytes(*size_kib));
  }
  return total;
}

result<memory_readings> probe_memory_readings(const fs::path& root, os_family os) {
  auto ram = read_physical_ram(root);
  if (!ram) return ram.err();
  memory_readings out;
  out.os = os;
  out.physical_ram = *ram;
  out.cgroup_limit = find_cgroup_limit(root, *ram);
  out.swap_total = read_swap_total(root);
  return out;
}

}  // namespace orch::ipc
