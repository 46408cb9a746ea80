// Response bodies and the handshake settings, checked in one place (ipc/response_bodies.hpp,
// ipc/handshake.hpp): what a worker or a host sends is read without a throw, or refused with a
// message that names the field.
#include <gtest/gtest.h>

#include "orch/ipc/errc.hpp"
#include "orch/ipc/handshake.hpp"
#include "orch/ipc/response_bodies.hpp"

namespace orch::ipc {
namespace {

using nlohmann::json;

// Unsigned numbers, as every non-negative integer decodes from the CBOR on the wire.
json ok_call() {
  return {{"status", "ok"},
          {"outputs", json::array({1})},
          {"inputs_seen", json::object()},
          {"allocations", json::array()},
          {"sequence", 1u},
          {"models", json::array({json{{"key", "m"}, {"size", 4u}, {"resident", 2u}}})}};
}

TEST(response_bodies, a_well_formed_call_response_passes) {
  EXPECT_TRUE(check_call_response(ok_call()).ok());
  EXPECT_TRUE(check_call_response(
                  {{"status", "error"}, {"error", {{"type", "out_of_memory"}, {"required", 8u}}}})
                  .ok());
}

TEST(response_bodies, a_call_response_of_the_wrong_shape_is_refused_by_field) {
  const json cases[] = {
      json::array(),
      {{"outputs", json::array()}},
      {{"status", 1}},
      {{"status", "ok"}},
      {{"status", "ok"}, {"outputs", json::object()}},
      {{"status", "ok"}, {"outputs", json::array()}, {"inputs_seen", json::array()}},
      {{"status", "ok"}, {"outputs", json::array()}, {"allocations", 3}},
      {{"status", "error"}},
      {{"status", "error"}, {"error", "text"}},
      {{"status", "error"}, {"error", {{"type", 7}}}},
      {{"status", "error"}, {"error", {{"required", -1}}}},
  };
  for (const auto& body : cases) {
    const auto st = check_call_response(body);
    ASSERT_FALSE(st.ok()) << body.dump();
    EXPECT_EQ(st.err().code, body_errc::bad_field);
    EXPECT_NE(st.err().message.find("the worker's response"), std::string::npos);
  }
}

TEST(response_bodies, a_models_report_needs_a_sequence_and_typed_models) {
  auto body = ok_call();
  body["sequence"] = 0u;
  EXPECT_FALSE(check_call_response(body).ok());
  body = ok_call();
  body["models"][0]["size"] = "4";  // text where a number belongs
  EXPECT_FALSE(check_models_report(body).ok());
  body = ok_call();
  body.erase("models");
  EXPECT_TRUE(check_models_report(body).ok()) << "no models: no report to check";
}

TEST(response_bodies, a_release_receipt_carries_freed_and_resident) {
  EXPECT_TRUE(check_release_receipt({{"freed", 1u}, {"resident", 0u}}).ok());
  EXPECT_FALSE(check_release_receipt({{"freed", 1u}}).ok());
  EXPECT_FALSE(check_release_receipt({{"freed", -1}, {"resident", 0u}}).ok());
}

TEST(handshake, the_settings_the_host_encodes_are_the_settings_the_worker_reads) {
  handshake_settings s;
  s.slot = 3;
  s.generation = 2;
  s.device = "sim";
  s.ordinal = 1;
  s.backend_plugin = "/p/orch-sim-backend.so";
  s.host_manager = "pager";
  s.level = 4;
  s.pager_plugin = "/p/orch-sim-pager.so";
  s.memory.streams = 2;
  s.memory.page_size = 2u << 20;
  s.memory.reserve_vram = 5;
  s.memory.pressure_source = 1;
  s.memory.pinned_memory = false;
  s.heartbeat_ms = 250;
  s.pool_segments = {{7, 64u << 20}};
  // Through CBOR, as the channel carries it: unsigned and signed numbers come back unsigned.
  const auto back = handshake_from_json(json::from_cbor(json::to_cbor(to_json(s))));
  ASSERT_TRUE(back.ok()) << back.err().message;
  EXPECT_EQ(to_json(*back), to_json(s));
}

TEST(handshake, a_missing_or_mistyped_field_is_named) {
  auto j = to_json(handshake_settings{});
  j.erase("page_size");
  auto r = handshake_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, handshake_errc::bad_handshake);
  EXPECT_NE(r.err().message.find("page_size"), std::string::npos) << r.err().message;
  j = to_json(handshake_settings{});
  j["pinned_memory"] = 1;
  r = handshake_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.err().message.find("pinned_memory"), std::string::npos) << r.err().message;
  EXPECT_FALSE(handshake_from_json(json::array()).ok());
}

}  // namespace
}  // namespace orch::ipc
