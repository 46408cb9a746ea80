// temp_tree: a fresh directory for one test (serve's file handling, a tool's process group, an
// empty PATH), removed after it, with helpers to lay files, directories and symlinks out inside it.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace orch::testing {

class temp_tree {
 public:
  temp_tree() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "orch-files-XXXXXX").string();
    root_ = ::mkdtemp(tmpl.data());
  }
  ~temp_tree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  temp_tree(const temp_tree&) = delete;
  temp_tree& operator=(const temp_tree&) = delete;

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path operator/(const std::string& rel) const { return root_ / rel; }

  void file(const std::string& rel, const std::string& bytes) const {
    std::filesystem::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel, std::ios::binary) << bytes;
  }
  void dir(const std::string& rel) const { std::filesystem::create_directories(root_ / rel); }
  void symlink(const std::filesystem::path& target, const std::string& rel) const {
    std::filesystem::create_directories((root_ / rel).parent_path());
    std::filesystem::create_symlink(target, root_ / rel);
  }
  std::string read(const std::string& rel) const {
    std::ifstream in(root_ / rel, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // The names in directory `rel`, sorted.
  std::string listing(const std::string& rel) const {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(root_ / rel))
      names.insert(e.path().filename().string());
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
    return out;
  }

 private:
  std::filesystem::path root_;
};

// What an open descriptor's file holds, from its current offset.
inline std::string read_fd(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

}  // namespace orch::testing
