// Every env manifest of the real-world corpus (shared/corpus/manifests) that comfy-orch accepts
// gives a pixi.toml that parses as TOML, by toml++ here and by Python's own tomllib, and keeps
// every dependency it declares: each conda and PyPI entry, in every [target.<platform>] too,
// stays at its place, the torch family as the host's pin, and each [cuda] wheel becomes a PyPI
// dependency. For uv and pip, every PyPI entry of this platform becomes a requirement line.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "manifest_test_support.hpp"
#include "orch/manifests/env_derivation.hpp"

namespace orch::manifests {
namespace {

namespace fs = std::filesystem;

bool torch_family(std::string name) {
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name == "torch" || name == "torchvision" || name == "torchaudio" || name == "pytorch";
}

// Each entry of `source`'s dependency table at `where` must be in `generated`'s.
void expect_kept(const toml::table* source, const toml::table* generated, const std::string& where,
                 const fs::path& file, std::size_t& checked) {
  if (source == nullptr) return;
  for (const auto& [name, spec] : *source) {
    ++checked;
    const bool present = generated != nullptr && generated->contains(name);
    if (torch_family(std::string(name.str()))) continue;  // replaced by the host's pin
    EXPECT_TRUE(present) << file.filename() << ": " << where << "." << name.str() << " lost";
  }
}

TEST(env_corpus, every_accepted_manifest_gives_a_pixi_toml_that_keeps_every_dependency) {
  if (!fs::exists(testing::corpus_dir() / "PROVENANCE.md")) {
    GTEST_SKIP() << "corpus not found at " << testing::corpus_dir()
                 << " (set ORCH_SHARED_DIR to the shared/ directory)";
  }
  const host_stack host{"3.11", "2.10.0", "cu128"};
  const target_platform platform{"linux-64", "2.36"};
  testing::temp_dir out;
  std::size_t manifests = 0;
  std::size_t dependencies = 0;
  for (const auto& entry : fs::recursive_directory_iterator(testing::corpus_dir())) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 14 || name.compare(name.size() - 14, 14, "comfy-env.toml") != 0) continue;
    diagnostics diags;
    const auto manifest = load_env_manifest(entry.path(), diags);
    if (!manifest || diags.has_errors()) continue;  // the corpus tests cover what is refused
    const auto d = derive_env("corpus-env", *manifest, host, platform, entry.path().parent_path());
    const std::string text = pixi_toml_text(d, entry.path());
    out.write(std::to_string(manifests++) + ".toml", text);

    toml::table generated;
    try {
      generated = toml::parse(text);
    } catch (const toml::parse_error& e) {
      ADD_FAILURE() << entry.path() << ": the generated pixi.toml does not parse: " << e.what();
      continue;
    }
    auto source = toml::parse_file(entry.path().string());
    auto feature = generated["feature"]["node"];
    for (const char* kind : {"dependencies", "pypi-dependencies"}) {
      expect_kept(source[kind].as_table(), feature[kind].as_table(), kind, entry.path(),
                  dependencies);
    }
    if (auto* targets = source["target"].as_table()) {
      for (auto& [platform_name, tables] : *targets) {
        if (!tables.is_table()) continue;
        for (const char* kind : {"dependencies", "pypi-dependencies"}) {
          expect_kept((*tables.as_table())[kind].as_table(),
                      feature["target"][platform_name.str()][kind].as_table(),
                      "target." + std::string(platform_name.str()) + "." + kind, entry.path(),
                      dependencies);
        }
      }
    }
    // uv and pip: every PyPI entry of this platform is a requirement line, or is named as one
    // pip cannot take.
    auto requirement_named = [&](const std::string& package) {
      for (const auto& lines : {d.requirements, d.untranslatable}) {
        for (const auto& line : lines) {
          if (line.rfind(package, 0) == 0) return true;
        }
      }
      return false;
    };
    for (auto* pypi : {source["pypi-dependencies"].as_table(),
                       source["target"]["linux-64"]["pypi-dependencies"].as_table()}) {
      if (pypi == nullptr) continue;
      for (const auto& [package, spec] : *pypi) {
        if (torch_family(std::string(package.str()))) continue;
        EXPECT_TRUE(requirement_named(std::string(package.str())))
            << entry.path().filename() << ": " << package.str() << " is no requirement line";
      }
    }
    for (const auto& wheel : manifest->cuda_packages) {
      if (torch_family(wheel)) continue;
      ++dependencies;
      EXPECT_TRUE(feature["pypi-dependencies"][wheel]) << entry.path() << ": [cuda] " << wheel;
    }
    EXPECT_EQ(feature["pypi-dependencies"]["torch"].value<std::string>(), "==2.10.*");
  }
  EXPECT_GT(manifests, 100u);
  EXPECT_GT(dependencies, 500u);

  // An independent reader: Python's tomllib parses every generated file.
  const std::string python =
      std::getenv("ORCH_TEST_PYTHON") ? std::getenv("ORCH_TEST_PYTHON") : "/usr/bin/python3";
  const std::string script =
      "import sys, tomllib, pathlib\n"
      "n = 0\n"
      "for p in sorted(pathlib.Path(sys.argv[1]).glob('*.toml')):\n"
      "    d = tomllib.loads(p.read_text())\n"
      "    assert d['environments']['default']['features'] == ['node'], p\n"
      "    n += 1\n"
      "print(n)\n";
  out.write("check.py", script);
  const std::string command = python + " " + (out.path() / "check.py").string() + " " +
                              out.path().string() + " > " + (out.path() / "count").string();
  if (std::system((python + " -c 'import tomllib' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << python << " has no tomllib (Python 3.11+); the toml++ check above ran";
  }
  ASSERT_EQ(std::system(command.c_str()), 0) << "tomllib refused a generated pixi.toml";
  std::ifstream count(out.path() / "count");
  std::size_t parsed = 0;
  count >> parsed;
  EXPECT_EQ(parsed, manifests);
}

}  // namespace
}  // namespace orch::manifests
