// serve_origin: ComfyUI's rule for cross-site requests to a loopback server, case by case.
#include "orch/serve/serve_origin.hpp"

#include <gtest/gtest.h>

namespace {

using orch::serve::cross_origin_refused;

TEST(serve_origin, another_site_addressing_a_loopback_server_is_refused) {
  EXPECT_TRUE(cross_origin_refused("127.0.0.1:8188", "https://evil.example"));
  EXPECT_TRUE(cross_origin_refused("localhost:8188", "http://evil.example:8188"));
  EXPECT_TRUE(cross_origin_refused("[::1]:8188", "http://evil.example"));
  EXPECT_TRUE(cross_origin_refused("127.0.0.2:8188", "http://127.0.0.1:8188"));
  EXPECT_TRUE(cross_origin_refused("127.0.0.1:8188", "http://localhost:8188"));  // as ComfyUI
  EXPECT_TRUE(cross_origin_refused("127.0.0.1:8188", "null"));  // a sandboxed frame
}

TEST(serve_origin, the_servers_own_page_and_clients_without_origin_pass) {
  EXPECT_FALSE(cross_origin_refused("127.0.0.1:8188", "http://127.0.0.1:8188"));
  EXPECT_FALSE(cross_origin_refused("LOCALHOST:8188", "http://localhost:8188"));
  EXPECT_FALSE(cross_origin_refused("[::1]:8188", "http://[::1]:8188"));
  EXPECT_FALSE(cross_origin_refused("127.0.0.1:8188", ""));  // scripts send no Origin
  EXPECT_FALSE(cross_origin_refused("", "https://evil.example"));
  // A side without a port is compared by host alone (ComfyUI's allowance for odd browsers).
  EXPECT_FALSE(cross_origin_refused("127.0.0.1", "http://127.0.0.1:8188"));
  EXPECT_FALSE(cross_origin_refused("127.0.0.1:8188", "http://127.0.0.1"));
}

// A host named with a trailing dot is the same host (a browser resolves "localhost." itself): it
// is judged, and compared, as the name without it.
TEST(serve_origin, a_fully_qualified_loopback_name_is_judged_as_loopback) {
  EXPECT_TRUE(cross_origin_refused("localhost.:8188", "http://evil.example"));
  EXPECT_TRUE(cross_origin_refused("a.localhost.:8188", "http://evil.example"));
  EXPECT_TRUE(cross_origin_refused("LOCALHOST..", "http://evil.example:8188"));
  EXPECT_TRUE(cross_origin_refused("[::ffff:127.0.0.1]:8188", "http://evil.example"));
  EXPECT_FALSE(cross_origin_refused("localhost.:8188", "http://localhost:8188"));
  EXPECT_FALSE(cross_origin_refused("localhost:8188", "http://localhost.:8188"));
}

TEST(serve_origin, a_server_reached_by_another_name_is_not_judged) {
  // Not loopback by its Host: ComfyUI's check does not apply (it guards the loopback case).
  EXPECT_FALSE(cross_origin_refused("192.168.1.5:8188", "https://evil.example"));
  EXPECT_FALSE(cross_origin_refused("comfy.example:8188", "https://evil.example"));
}

}  // namespace
