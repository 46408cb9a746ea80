// Helpers for manifest tests: parse TOML text and find diagnostics by key.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "orch/manifests/diagnostic.hpp"

namespace orch::manifests::testing {

// The first diagnostic with this key and level, or null.
inline const diagnostic* find(const diagnostics& diags, const std::string& key,
                              severity level = severity::error) {
  for (const auto& d : diags.items()) {
    if (d.key == key && d.level == level) return &d;
  }
  return nullptr;
}

// Asserts exactly one error, at the given line/column with the given key.
#define EXPECT_SINGLE_ERROR_AT(diags, key_, line_, column_)             \
  do {                                                                  \
    ASSERT_EQ((diags).count(::orch::manifests::severity::error), 1u)    \
        << ::orch::manifests::testing::dump(diags);                     \
    const auto* e_ = ::orch::manifests::testing::find((diags), (key_)); \
    ASSERT_NE(e_, nullptr) << ::orch::manifests::testing::dump(diags);  \
    EXPECT_EQ(e_->where.line, (line_)) << e_->format();                 \
    EXPECT_EQ(e_->where.column, (column_)) << e_->format();             \
    EXPECT_FALSE(e_->fix.empty()) << e_->format();                      \
  } while (0)

// The real-world corpus of manifests (shared/corpus/manifests): ORCH_SHARED_DIR's, else the
// shared/ beside the checkout.
inline std::filesystem::path corpus_dir() {
  if (const char* dir = std::getenv("ORCH_SHARED_DIR"))
    return std::filesystem::path(dir) / "corpus/manifests";
  return std::filesystem::path(ORCH_SOURCE_DIR) / ".." / "shared" / "corpus" / "manifests";
}

inline std::string dump(const diagnostics& diags) {
  std::string out;
  for (const auto& d : diags.items()) out += d.format() + "\n";
  return out;
}

// A fresh directory under the system temp dir, removed with its contents on destruction.
class temp_dir {
 public:
  temp_dir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("orch-test-" + std::to_string(rd()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `text` to path()/relative, creating directories.
  std::filesystem::path write(const std::filesystem::path& relative,
                              const std::string& text) const {
    const auto file = path_ / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace orch::manifests::testing
