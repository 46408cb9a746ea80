// How the env manager's backend is chosen: the one asked for must be installed, and without a
// request a venv of the host's Python serves.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "orch/envs/env_backend.hpp"
#include "orch/envs/errc.hpp"
#include "temp_tree.hpp"

namespace orch::envs {
namespace {

TEST(env_backend, the_backend_asked_for_must_be_installed) {
  testing::temp_tree empty;
  const char* old = std::getenv("PATH");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("PATH", empty.root().c_str(), 1);
  auto pixi = choose_backend("pixi", "/usr/bin/python3");
  auto uv = choose_backend("uv", "/usr/bin/python3");
  auto fallback = choose_backend("", "/usr/bin/python3");
  auto unknown = choose_backend("conda", "/usr/bin/python3");
  ::setenv("PATH", saved.c_str(), 1);
  ASSERT_FALSE(pixi);
  EXPECT_EQ(pixi.err().code, envs_errc::not_found);
  EXPECT_NE(pixi.err().message.find("pixi is not on PATH"), std::string::npos);
  ASSERT_FALSE(uv);
  EXPECT_EQ(unknown.err().code, envs_errc::invalid_request);
  if (std::filesystem::exists("/usr/bin/python3")) {
    ASSERT_TRUE(fallback) << fallback.err().message;
    EXPECT_EQ(*fallback, env_backend_kind::venv);
  }
}

}  // namespace
}  // namespace orch::envs
