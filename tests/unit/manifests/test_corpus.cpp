// The real-world corpus (shared/corpus/manifests, 194 files), read in place. Expectations come
// from its PROVENANCE.md: every file is accepted except the two that are not valid TOML; every
// file comfy-env rejects for its sections is accepted with a warning per section; every expected
// env name is reproduced.
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "manifest_test_support.hpp"
#include "orch/manifests/env_naming.hpp"
#include "orch/manifests/validate.hpp"

namespace orch::manifests {
namespace {

namespace fs = std::filesystem;

#define REQUIRE_CORPUS()                                 \
  if (!fs::exists(testing::corpus_dir() / "PROVENANCE.md"))       \
  GTEST_SKIP() << "corpus not found at " << testing::corpus_dir() \
               << " (set ORCH_SHARED_DIR to the shared/ directory to run the corpus tests)"

std::vector<std::string> split_row(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (std::size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '|') {
      cells.push_back(cell);
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  for (auto& c : cells) {
    const auto b = c.find_first_not_of(' ');
    const auto e = c.find_last_not_of(' ');
    c = b == std::string::npos ? "" : c.substr(b, e - b + 1);
  }
  return cells;
}

std::string first_backticked(const std::string& cell) {
  const auto b = cell.find('`');
  if (b == std::string::npos) return {};
  const auto e = cell.find('`', b + 1);
  return cell.substr(b + 1, e - b - 1);
}

struct provenance_row {
  std::string file;  // relative to the corpus dir (newest/ files carry that prefix)
  std::string repository;
  std::string path;
  std::string expected_env;  // empty for "—"
};

struct provenance {
  std::vector<provenance_row> files;
  std::vector<std::pair<std::string, std::string>> load_failures;  // file, outcome
  std::vector<std::pair<std::string, std::string>> load_warnings;  // file, warning text
};

provenance read_provenance() {
  provenance p;
  std::ifstream in(testing::corpus_dir() / "PROVENANCE.md");
  std::string line;
  std::string section;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0 || line.rfind("Files that load but print", 0) == 0) {
      section = line;
      continue;
    }
    if (line.rfind("| `", 0) != 0) continue;
    const auto cells = split_row(line);
    if (cells.size() == 6) {
      provenance_row row{first_backticked(cells[0]), cells[1], first_backticked(cells[2]),
                         cells[5].rfind("—", 0) == 0 ? "" : first_backticked(cells[5])};
      p.files.push_back(row);
    } else if (cells.size() == 2 && section.rfind("## Load check", 0) == 0) {
      p.load_failures.emplace_back(first_backticked(cells[0]), cells[1]);
    } else if (cells.size() == 2 && section.rfind("Files that load", 0) == 0) {
      p.load_warnings.emplace_back(first_backticked(cells[0]), cells[1]);
    }
  }
  return p;
}

TEST(corpus, provenance_lists_all_194_files) {
  REQUIRE_CORPUS();
  const auto p = read_provenance();
  EXPECT_EQ(p.files.size(), 194u);
  std::size_t on_disk = 0;
  for (const auto& row : p.files) on_disk += fs::exists(testing::corpus_dir() / row.file) ? 1 : 0;
  EXPECT_EQ(on_disk, 194u);
}

TEST(corpus, every_file_is_accepted_except_the_two_invalid_toml_ones) {
  REQUIRE_CORPUS();
  const auto p = read_provenance();
  std::set<std::string> rejected;
  for (const auto& row : p.files) {
    const auto diags = validate_file(testing::corpus_dir() / row.file);
    if (diags.has_errors()) {
      rejected.insert(row.file);
      ASSERT_EQ(diags.count(severity::error), 1u) << testing::dump(diags);
      EXPECT_NE(diags.items()[0].message.find("not valid TOML"), std::string::npos)
          << testing::dump(diags);
    }
  }
  EXPECT_EQ(rejected, (std::set<std::string>{
                          "borisfaley__ComfyUI-MotionCapture__nodes__nodes_gpu__comfy-env.toml",
                          "yic03685__ComfyUI-SAM3__comfy-env-root.toml"}));
}

TEST(corpus, invalid_toml_files_are_rejected_naming_their_line) {
  REQUIRE_CORPUS();
  const auto p = read_provenance();
  const std::regex at_line(R"(at line (\d+), column (\d+))");
  std::size_t checked = 0;
  for (const auto& [file, outcome] : p.load_failures) {
    std::smatch m;
    if (outcome.rfind("not valid TOML", 0) != 0 || !std::regex_search(outcome, m, at_line))
      continue;
    const auto diags = validate_file(testing::corpus_dir() / file);
    ASSERT_EQ(diags.count(severity::error), 1u) << file;
    EXPECT_EQ(diags.items()[0].where.line, static_cast<std::uint32_t>(std::stoul(m[1]))) << file;
    EXPECT_NE(diags.items()[0].where.column, 0u);
    ++checked;
  }
  EXPECT_EQ(checked, 2u);
}

TEST(corpus, files_comfy_env_rejects_are_accepted_with_a_warning_per_section) {
  REQUIRE_CORPUS();
  const auto p = read_provenance();
  const std::regex section(R"(\[([A-Za-z0-9_.-]+)\])");
  std::size_t checked = 0;
  for (const auto& [file, outcome] : p.load_failures) {
    if (outcome.rfind("rejected:", 0) != 0) continue;
    const auto diags = validate_file(testing::corpus_dir() / file);
    EXPECT_FALSE(diags.has_errors()) << file << "\n" << testing::dump(diags);
    for (std::sregex_iterator it(outcome.begin(), outcome.end(), section), end; it != end; ++it) {
      const std::string key = "[" + (*it)[1].str() + "]";
      // [node_packs] is read (it is the newer era's name); it gets a note rather than a warning.
      const auto* w =
          testing::find(diags, key, key == "[node_packs]" ? severity::note : severity::warning);
      ASSERT_NE(w, nullptr) << file << " lacks a warning for " << key << "\n"
                            << testing::dump(diags);
      EXPECT_NE(w->where.line, 0u) << file << " " << key;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 52u);
}

TEST(corpus, unknown_keys_comfy_env_warns_about_are_warned_about) {
  REQUIRE_CORPUS();
  const auto p = read_provenance();
  const std::regex unknown(R"(unrecognized key '([^']+)' in \[([a-z_]+)\])");
  std::size_t checked = 0;
  for (const auto& [file, text] : p.load_warnings) {
    const auto diags = validate_file(testing::corpus_dir() / file);
    EXPECT_FALSE(diags.has_errors()) << file;
    for (std::sregex_iterator it(text.begin(), text.end(), unknown), end; it != end; ++it) {
      const std::string key = (*it)[2].str() + "." + (*it)[1].str();
      EXPECT_NE(testing::find(diags, key, severity::warning), nullptr) << file << " " << key;
      ++checked;
    }
  }
  EXPECT_GE(checked, 20u);
}

TEST(corpus, every_expected_env_name_is_reproduced) {
  REQUIRE_CORPUS();
  const auto p = read_provenance();
  std::size_t checked = 0;
  for (const auto& row : p.files) {
    if (row.expected_env.empty()) continue;
    testing::temp_dir tmp;
    const std::string repo_name = row.repository.substr(row.repository.find('/') + 1);
    const fs::path pack = tmp.path() / repo_name;
    const fs::path config_dir = (pack / row.path).parent_path();
    fs::create_directories(config_dir);
    EXPECT_EQ(env_name(pack, config_dir), row.expected_env) << row.file;
    ++checked;
  }
  EXPECT_GT(checked, 100u);
}

}  // namespace
}  // namespace orch::manifests
