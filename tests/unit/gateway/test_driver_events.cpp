// The Ray driver's lines (host_source.hpp, driver_event): a line is read like anything from
// outside, so a field of the wrong type or a host the driver never names is no event, said why,
// and never an exception on the thread that reads them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "orch/gateway/host_source.hpp"

namespace orch::gateway {
namespace {

TEST(driver_events, host_up_and_down_are_read) {
  std::string why;
  const auto up = driver_event(
      R"({"event":"host_up","host":"host-2","url":"http://127.0.0.1:4100","pid":77})", why);
  ASSERT_TRUE(up) << why;
  EXPECT_EQ(up->host, "host-2");
  EXPECT_EQ(up->address, "127.0.0.1");
  EXPECT_EQ(up->port, 4100);
  const auto down =
      driver_event(R"({"event":"host_down","host":"host-2","reason":"actor died"})", why);
  ASSERT_TRUE(down) << why;
  EXPECT_NE(down->reason.find("actor died"), std::string::npos);
}

TEST(driver_events, fields_of_the_wrong_type_are_no_event_and_never_throw) {
  for (const char* line :
       {R"({"event":1})", R"({"event":"host_up","host":7})", R"({"event":"error","message":[]})",
        R"({"event":"host_up","host":"host-0","url":{}})", R"([1,2])", "not json", ""}) {
    std::string why;
    EXPECT_NO_THROW({ EXPECT_FALSE(driver_event(line, why)) << line; }) << line;
    EXPECT_FALSE(why.empty()) << line;
  }
}

TEST(driver_events, a_host_the_driver_never_names_is_no_event) {
  for (const char* host : {"evil", "host-", "host-1234567", "host-0\n", "../host-0"}) {
    std::string why;
    const std::string line =
        nlohmann::json{{"event", "host_up"}, {"host", host}, {"url", "http://127.0.0.1:1"}}.dump();
    EXPECT_FALSE(driver_event(line, why)) << host;
    EXPECT_NE(why.find("host-<n>"), std::string::npos) << why;
  }
}

}  // namespace
}  // namespace orch::gateway
