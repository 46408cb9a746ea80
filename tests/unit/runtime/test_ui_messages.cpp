// A worker's messages for ComfyUI's clients, checked as they arrive (orch/runtime/ui_messages.hpp):
// everything in one is the worker's, so a malformed one is refused with what is wrong.
#include "orch/runtime/ui_messages.hpp"

#include <gtest/gtest.h>

namespace orch::runtime {
namespace {

using json = nlohmann::json;

json preview(std::uint64_t width, std::uint64_t height, std::size_t bytes) {
  return {{"node", "5"},
          {"value", 1},
          {"max", 4},
          {"preview",
           {{"format", "JPEG"},
            {"width", width},
            {"height", height},
            {"max_size", 512},
            {"pixels", json::binary(std::vector<std::uint8_t>(bytes, 7))}}}};
}

std::string refusal(const json& body) {
  auto checked = checked_ui_message(body);
  return checked ? std::string() : checked.err().message;
}

TEST(ui_messages, a_named_event_and_a_binary_one_pass_as_comfyui_sends_them) {
  auto named = checked_ui_message({{"event", "pack.status"}, {"data", {{"a", 1}}}, {"sid", "c1"}});
  ASSERT_TRUE(named.ok()) << named.err().message;
  EXPECT_EQ(*named, json({{"event", "pack.status"}, {"data", {{"a", 1}}}, {"sid", "c1"}}));
  auto binary = checked_ui_message(
      {{"event", 3}, {"data", json::binary({0, 0, 0, 1, 'x'})}, {"sid", nullptr}});
  ASSERT_TRUE(binary.ok()) << binary.err().message;
  EXPECT_TRUE((*binary)["data"].is_binary());
  EXPECT_TRUE((*binary)["sid"].is_null());
  auto shown = checked_ui_message(preview(4, 2, 4 * 2 * 3));
  ASSERT_TRUE(shown.ok()) << shown.err().message;
  EXPECT_EQ((*shown)["preview"]["width"], 4);
}

TEST(ui_messages, a_malformed_message_is_refused_saying_what_is_wrong) {
  EXPECT_EQ(refusal(json::array()), "it is not an object");
  EXPECT_EQ(refusal({{"event", ""}}), "its event is neither a name nor a binary event's number");
  EXPECT_EQ(refusal({{"event", std::string(257, 'e')}}),
            "its event is neither a name nor a binary event's number");
  EXPECT_EQ(refusal({{"event", "a\x1b[2Jb"}}),
            "its event is neither a name nor a binary event's number");
  EXPECT_EQ(refusal({{"event", -1}}), "its event is neither a name nor a binary event's number");
  EXPECT_EQ(refusal({{"event", std::uint64_t{1} << 32}, {"data", json::binary({})}}),
            "its binary event is not a 32-bit number");
  EXPECT_EQ(refusal({{"event", 3}, {"data", "text"}}), "its binary event's data is not bytes");
  EXPECT_EQ(refusal({{"event", "e"}, {"sid", 5}}), "its sid is not a client id");
  EXPECT_EQ(refusal({{"event", "e"}, {"sid", std::string(300, 's')}}),
            "its sid is not a client id");
}

TEST(ui_messages, a_preview_is_exactly_its_rgb_pixels_within_bounds) {
  EXPECT_EQ(refusal(preview(4, 2, 4 * 2 * 3 - 1)),
            "its preview's pixels are not width * height RGB bytes");
  EXPECT_EQ(refusal(preview(0, 2, 0)), "its preview is not between 1 and 4096 pixels on each side");
  EXPECT_EQ(refusal(preview(5000, 1, 15000)),
            "its preview is not between 1 and 4096 pixels on each side");
  // A size whose product overflows is refused by the bounds before any product is taken.
  EXPECT_EQ(refusal(preview(std::uint64_t{1} << 40, std::uint64_t{1} << 40, 0)),
            "its preview is not between 1 and 4096 pixels on each side");
  json png = preview(1, 1, 3);
  png["preview"]["format"] = "GIF";
  EXPECT_EQ(refusal(png), "its preview's format is none of JPEG, PNG and WEBP");
  json nodeless = preview(1, 1, 3);
  nodeless.erase("node");
  EXPECT_EQ(refusal(nodeless), "its preview has no node, value and max");
}

}  // namespace
}  // namespace orch::runtime
