// comfy-env.toml schema rules (docs/references.md, comfy-env §2.2) and comfy-orch's policy for
// every era found in the wild: errors only for what would break the environment.
#include <gtest/gtest.h>

#include "manifest_test_support.hpp"
#include "orch/manifests/env_manifest.hpp"
#include "orch/manifests/toml_source.hpp"

namespace orch::manifests {
namespace {

using testing::find;

struct parsed {
  env_manifest manifest;
  diagnostics diags;
};

parsed parse(const std::string& text) {
  parsed p;
  auto table = parse_toml_text(text, "nodes/comfy-env.toml", p.diags);
  if (table) p.manifest = parse_env_manifest(*table, "nodes/comfy-env.toml", p.diags);
  return p;
}

// ---- accepted shapes ----

TEST(env_manifest, empty_file_is_valid_schema_one) {
  auto p = parse("");
  EXPECT_TRUE(p.diags.items().empty());
  EXPECT_EQ(p.manifest.schema, 1);
  EXPECT_FALSE(p.manifest.python);
}

TEST(env_manifest, python_string_is_kept_verbatim) {
  auto p = parse("python = \"3.10\"\n");
  EXPECT_FALSE(p.diags.has_errors());
  EXPECT_EQ(p.manifest.python, "3.10");
}

TEST(env_manifest, cuda_packages_scalar_is_normalised_to_list) {
  auto p = parse("[cuda]\npackages = \"flash-attn\"\n");
  EXPECT_FALSE(p.diags.has_errors());
  EXPECT_EQ(p.manifest.cuda_packages, std::vector<std::string>{"flash-attn"});
}

TEST(env_manifest, cuda_packages_list_is_kept_in_order) {
  auto p = parse("[cuda]\npackages = [\"spconv\", \"cumesh\"]\n");
  EXPECT_EQ(p.manifest.cuda_packages, (std::vector<std::string>{"spconv", "cumesh"}));
}

TEST(env_manifest, env_vars_scalars_are_stored_as_strings_in_file_order) {
  auto p = parse(
      "[env_vars]\nB_STR = \"x\"\nA_INT = 4\nC_FLOAT = 0.5\nD_TRUE = true\nE_FALSE = false\n");
  EXPECT_FALSE(p.diags.has_errors()) << testing::dump(p.diags);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"B_STR", "x"}, {"A_INT", "4"}, {"C_FLOAT", "0.5"}, {"D_TRUE", "1"}, {"E_FALSE", "0"}};
  EXPECT_EQ(p.manifest.env_vars, expected);
}

TEST(env_manifest, options_are_read_as_seconds) {
  auto p = parse("[options]\nhealth_check_timeout = 7\ncall_timeout = 120.5\n");
  EXPECT_FALSE(p.diags.has_errors());
  EXPECT_EQ(p.manifest.options.health_check_timeout_s, 7.0);
  EXPECT_EQ(p.manifest.options.call_timeout_s, 120.5);
}

// ---- dependency entries (docs/security.md, "Manifests") ----

// E2: a newline in a key passed validate, then every command failed naming no file.
TEST(env_manifest, a_newline_in_a_pypi_key_is_an_error_naming_file_line_and_key) {
  auto p = parse("[pypi-dependencies]\n\"six\\nx\" = \"*\"\n");
  ASSERT_TRUE(p.diags.has_errors());
  const auto* d = find(p.diags, "pypi-dependencies.six\\x0ax");
  ASSERT_NE(d, nullptr) << testing::dump(p.diags);
  EXPECT_EQ(d->where.file, "nodes/comfy-env.toml");
  EXPECT_EQ(d->where.line, 2u);
  EXPECT_NE(d->message.find("not a package name"), std::string::npos);
}

// E3: pip obeys an option line in a requirements file.
TEST(env_manifest, a_pip_option_in_a_pypi_value_or_key_is_an_error) {
  auto p = parse("[pypi-dependencies]\nsix = \">=0\\n--index-url http://127.0.0.1:9/simple\"\n"
                 "\"--extra-index-url=http://x\" = \"*\"\nnumpy = \">=1.24 --pre\"\n"
                 "[target.linux-64.pypi-dependencies]\nplyfile = { git = \"--upload-pack=x\" }\n");
  EXPECT_NE(find(p.diags, "pypi-dependencies.six"), nullptr) << testing::dump(p.diags);
  EXPECT_NE(find(p.diags, "pypi-dependencies.--extra-index-url=http://x"), nullptr);
  EXPECT_NE(find(p.diags, "pypi-dependencies.numpy"), nullptr);
  EXPECT_NE(find(p.diags, "target.linux-64.pypi-dependencies.plyfile.git"), nullptr);
}

// pip reads a requirements file with str.splitlines(), which also splits on U+0085, U+2028 and
// U+2029: through any of them an option line reached pip. Only printable ASCII passes.
TEST(env_manifest, a_unicode_line_separator_in_a_pypi_value_is_an_error) {
  for (const char* separator : {"\u2028", "\u2029", "\u0085"}) {
    auto p = parse(std::string("[pypi-dependencies]\nsix = \">=0") + separator +
                   "--index-url http://127.0.0.1:9/simple\"\n"
                   "plyfile = { git = \"https://x.example/p.git" + separator +
                   "--trusted-host x\" }\n");
    const auto* d = find(p.diags, "pypi-dependencies.six");
    ASSERT_NE(d, nullptr) << separator << testing::dump(p.diags);
    EXPECT_NE(d->message.find("printable ASCII"), std::string::npos) << d->message;
    EXPECT_NE(find(p.diags, "pypi-dependencies.plyfile.git"), nullptr) << testing::dump(p.diags);
  }
}

TEST(env_manifest, real_dependency_entries_pass) {
  auto p = parse(
      "[dependencies]\nffmpeg = \"*\"\nc-compiler = \"*\"\n"
      "[pypi-dependencies]\nnumpy = \">=1.24,<2\"\nplyfile = \"*\"\ntorch_scatter = \"2.1.2\"\n"
      "\"trimesh[easy]\" = \"*\"\n"
      "nanogs = { git = \"https://github.com/saliteta/NanoGS.git\", rev = \"abc123\" }\n"
      "x = { version = \">=1\", extras = [\"cuda\"] }\n"
      "y = { version = \">=1; python_version < '3.12'\" }\n"
      "local = { path = \"wheels/local-0.1-py3-none-any.whl\", editable = false }\n");
  EXPECT_FALSE(p.diags.has_errors()) << testing::dump(p.diags);
}

TEST(env_manifest, passthrough_tables_are_preserved) {
  auto p = parse(
      "[dependencies]\nffmpeg = \"*\"\n[pypi-dependencies]\nnumpy = \">=1.24\"\n"
      "[target.linux-64.pypi-dependencies]\nx = \"1\"\n[workspace]\nchannels = [\"conda-forge\"]\n"
      "[activation]\nenv = { A = \"1\" }\n[pypi-options]\nno-build-isolation = true\n"
      "[system-requirements]\ncuda = \"12\"\n[tasks]\nhello = \"echo hi\"\n");
  EXPECT_TRUE(p.diags.items().empty()) << testing::dump(p.diags);
  for (const char* key : {"dependencies", "pypi-dependencies", "target", "workspace", "activation",
                          "pypi-options", "system-requirements", "tasks"}) {
    ASSERT_TRUE(p.manifest.passthrough.count(key)) << key;
  }
  EXPECT_NE(p.manifest.passthrough["dependencies"].find("ffmpeg = '*'"), std::string::npos)
      << p.manifest.passthrough["dependencies"];
  EXPECT_NE(p.manifest.passthrough["workspace"].find("conda-forge"), std::string::npos);
}

TEST(env_manifest, worker_table_names_native_library_and_device) {
  auto p = parse("[worker]\nlibrary = \"libimage_ops.so\"\ndevice = \"cuda:1\"\n");
  EXPECT_FALSE(p.diags.has_errors());
  EXPECT_TRUE(p.manifest.is_native());
  EXPECT_EQ(p.manifest.worker.library, "libimage_ops.so");
  EXPECT_EQ(p.manifest.worker.device, "cuda:1");
}

// ---- warnings: accepted, loud ----

TEST(env_manifest, root_only_sections_warn_and_are_ignored) {
  auto p = parse(
      "[node_reqs]\nA = \"o/r\"\n[settings]\nisolate = true\n[types]\nX = \"custom\"\n"
      "[node_packs]\nB = \"o/b\"\n");
  EXPECT_FALSE(p.diags.has_errors());
  for (const char* key : {"[node_reqs]", "[settings]", "[types]", "[node_packs]"}) {
    const auto* w = find(p.diags, key, severity::warning);
    ASSERT_NE(w, nullptr) << key;
    EXPECT_NE(w->message.find("ignores"), std::string::npos);
  }
  EXPECT_EQ(find(p.diags, "[node_reqs]", severity::warning)->where.line, 1u);
  EXPECT_EQ(find(p.diags, "[settings]", severity::warning)->where.line, 3u);
}

TEST(env_manifest, unknown_cuda_and_options_keys_warn) {
  auto p = parse("[cuda]\npackages = []\nspconv = \"x\"\n[options]\nshared_env_name = \"a\"\n");
  EXPECT_FALSE(p.diags.has_errors());
  const auto* w1 = find(p.diags, "cuda.spconv", severity::warning);
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(w1->where.line, 3u);
  const auto* w2 = find(p.diags, "options.shared_env_name", severity::warning);
  ASSERT_NE(w2, nullptr);
  EXPECT_EQ(w2->where.line, 5u);
}

TEST(env_manifest, earlier_layout_sections_warn_with_line) {
  auto p = parse("name = \"old\"\n\n[env]\npython = \"3.10\"\n[apt]\npackages = [\"x\"]\n");
  EXPECT_FALSE(p.diags.has_errors());
  EXPECT_EQ(find(p.diags, "name", severity::warning)->where.line, 1u);
  EXPECT_EQ(find(p.diags, "[env]", severity::warning)->where.line, 3u);
  const auto* apt = find(p.diags, "[apt]", severity::warning);
  ASSERT_NE(apt, nullptr);
  EXPECT_EQ(apt->where.line, 5u);
  EXPECT_NE(apt->message.find("ignored"), std::string::npos);
}

TEST(env_manifest, workspace_other_keys_warn) {
  auto p = parse("[workspace]\nchannels = [\"c\"]\nauthors = [\"me\"]\n");
  EXPECT_FALSE(p.diags.has_errors());
  EXPECT_NE(find(p.diags, "workspace.authors", severity::warning), nullptr);
}

// ---- errors: exact location and key ----

TEST(env_manifest_errors, invalid_toml_names_line_and_column) {
  auto p = parse("python = \"3.11\"\n[cuda\npackages = []\n");
  ASSERT_EQ(p.diags.count(severity::error), 1u);
  EXPECT_EQ(p.diags.items()[0].where.line, 2u);
  EXPECT_EQ(p.diags.items()[0].where.column, 6u);
  EXPECT_NE(p.diags.items()[0].message.find("not valid TOML"), std::string::npos);
}

TEST(env_manifest_errors, unquoted_python_float_is_rejected_at_its_value) {
  auto p = parse("\npython = 3.10\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "python", 2u, 10u);
  EXPECT_NE(find(p.diags, "python")->message.find("float"), std::string::npos);
  EXPECT_NE(find(p.diags, "python")->fix.find("python = \"3.11\""), std::string::npos);
}

TEST(env_manifest_errors, python_integer_is_rejected) {
  auto p = parse("python = 3\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "python", 1u, 10u);
}

TEST(env_manifest_errors, schema_two_is_rejected) {
  auto p = parse("# header\nschema = 2\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "schema", 2u, 10u);
  EXPECT_NE(find(p.diags, "schema")->message.find("only 1"), std::string::npos);
}

TEST(env_manifest_errors, schema_string_is_rejected) {
  auto p = parse("schema = \"1\"\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "schema", 1u, 10u);
}

TEST(env_manifest_errors, env_var_array_is_rejected_naming_the_variable) {
  auto p = parse("[env_vars]\nOK = \"1\"\nBAD = [1, 2]\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "env_vars.BAD", 3u, 7u);
  EXPECT_EQ(p.manifest.env_vars.size(), 1u);
}

TEST(env_manifest_errors, env_var_inline_table_is_rejected) {
  auto p = parse("[env_vars]\n\nNESTED = { a = 1 }\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "env_vars.NESTED", 3u, 10u);
}

TEST(env_manifest_errors, env_var_name_with_equals_is_rejected) {
  auto p = parse("[env_vars]\n\"A=B\" = \"x\"\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "env_vars.A=B", 2u, 9u);
}

TEST(env_manifest_errors, environments_table_is_rejected) {
  auto p = parse("python = \"3.11\"\n[environments]\ndefault = []\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "[environments]", 2u, 1u);
}

TEST(env_manifest_errors, feature_tables_are_rejected_at_their_first_header) {
  auto p = parse("python = \"3.11\"\n\n[feature.gpu.dependencies]\ncuda = \"*\"\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "[feature]", 3u, 1u);
}

TEST(env_manifest_errors, workspace_name_is_rejected) {
  auto p = parse("[workspace]\nchannels = [\"c\"]\nname = \"mine\"\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "workspace.name", 3u, 8u);
}

TEST(env_manifest_errors, workspace_platforms_is_rejected) {
  auto p = parse("[workspace]\nplatforms = [\"linux-64\"]\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "workspace.platforms", 2u, 13u);
}

TEST(env_manifest_errors, workspace_version_is_rejected) {
  auto p = parse("workspace.version = \"1.0\"\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "workspace.version", 1u, 21u);
}

TEST(env_manifest_errors, cuda_packages_of_numbers_are_rejected) {
  auto p = parse("[cuda]\npackages = [\"ok\", 3]\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "cuda.packages", 2u, 19u);
}

TEST(env_manifest_errors, negative_health_check_timeout_is_rejected) {
  auto p = parse("[options]\nhealth_check_timeout = -1\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "options.health_check_timeout", 2u, 24u);
}

TEST(env_manifest_errors, unknown_worker_device_is_rejected) {
  auto p = parse("[worker]\nlibrary = \"libx.so\"\ndevice = \"tpu\"\n");
  EXPECT_SINGLE_ERROR_AT(p.diags, "worker.device", 3u, 10u);
}

TEST(env_manifest_errors, every_error_line_is_formatted_with_file_line_column_key_and_fix) {
  auto p = parse("schema = 3\n");
  ASSERT_EQ(p.diags.items().size(), 1u);
  EXPECT_EQ(p.diags.items()[0].format(),
            "nodes/comfy-env.toml:1:10: error: schema: schema 3 is not supported (only 1 is) "
            "(fix: write schema = 1, or remove the key (absent means 1))");
}

}  // namespace
}  // namespace orch::manifests
