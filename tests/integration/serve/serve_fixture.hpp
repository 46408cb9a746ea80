// The serve tests' fixture (test_serve_*.cpp): a real `comfy-orch serve` process over the runtime
// fixture's deployment, what the tests send it, and how they wait for it (wait_until.hpp).
#pragma once

#include <gtest/gtest.h>

#include <poll.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime_fixture.hpp"
#include "serve_client.hpp"
#include "wait_until.hpp"

namespace orch::serve_testing {

using namespace std::chrono_literals;
using nlohmann::json;
using orch::testing::serve_process;
using orch::testing::http_connection;
using orch::testing::ws_client;
using tcp = boost::asio::ip::tcp;
namespace http = boost::beast::http;

inline const json quick_prompt = json::parse(R"({
  "1": {"class_type": "SolidImage", "inputs": {"width": 16, "height": 8, "value": 0.5}},
  "4": {"class_type": "ImageChecksum", "inputs": {"image": ["1", 0]}}})");

// A prompt whose class has VALIDATE_INPUTS, which runs in its worker before it is queued.
inline const json checked_prompt = {
    {"prompt", {{"9", {{"class_type", "TestChecked"}, {"inputs", {{"value", 5}}}}}}},
    {"client_id", "c"}};

inline json sleep_prompt(int ms) {
  return {{"1", {{"class_type", "TestSleep"}, {"inputs", {{"ms", ms}}}}}};
}

class serve_test : public orch::runtime_testing::runtime_test {
 protected:
  std::unique_ptr<serve_process> serve(std::vector<std::string> extra = {},
                                       const orch::runtime_testing::deployment_options& o = {}) {
    auto s = std::make_unique<serve_process>(ORCH_TEST_COMFY_ORCH, write_deployment(o).string(),
                                             std::move(extra));
    EXPECT_NE(s->port(), 0) << "serve did not print its 'listening on' line";
    return s;
  }
  static std::string queue(const serve_process& s, const json& prompt,
                           const std::string& client_id = {}) {
    json body = {{"prompt", prompt}};
    if (!client_id.empty()) body["client_id"] = client_id;
    const auto r = s.post("/prompt", body);
    EXPECT_EQ(r.status, 200u) << r.body;
    return r.json().value("prompt_id", "");
  }
  // Whether one of `messages` is of `type`.
  static bool heard(const std::vector<json>& messages, const std::string& type) {
    return std::any_of(messages.begin(), messages.end(),
                       [&](const json& m) { return m["type"] == type; });
  }
  // Until a prompt runs (the assertion on that is the caller's, on what it then sees).
  static void wait_until_one_runs(const serve_process& s) {
    wait_until([&] { return !s.get("/queue").json()["queue_running"].empty(); });
  }
  // Until a prompt runs, and a moment more, so that its worker is inside the node.
  static void wait_inside_the_running_node(const serve_process& s) {
    wait_until_one_runs(s);
    std::this_thread::sleep_for(200ms);
  }
  // Until no prompt is queued or running.
  static void wait_until_idle(const serve_process& s) {
    wait_until([&] { return s.get("/prompt").json()["exec_info"]["queue_remaining"] == 0; });
  }
  static json history_of(const serve_process& s, const std::string& id) {
    return s.get("/history/" + id).json().value(id, json());
  }
  // The history's entry of prompt `id` once it has one (null if it never came).
  static json finished(const serve_process& s, const std::string& id) {
    json entry;
    wait_until([&] { return !(entry = history_of(s, id)).is_null(); });
    return entry;
  }
  static std::map<std::string, pid_t> worker_pids(const serve_process& s) {
    std::map<std::string, pid_t> pids;
    const auto stats = s.get("/system_stats");
    EXPECT_EQ(stats.status, 200u) << stats.body;
    const json body = stats.json();  // not a range over a temporary's member
    for (const auto& row : body["orch_processes"])
      if (row.value("mode", "") == "worker") pids[row["process"]] = row["pid"].get<pid_t>();
    return pids;
  }
};

inline const std::string form_boundary = "----orchServeTestBoundary0xC0FFEE";
inline const std::string form_type = "multipart/form-data; boundary=" + form_boundary;

// A multipart/form-data body as a browser sends it: the file in `image`, then text fields.
// (Built in one buffer: copies of a 60 MiB body are most of what a large upload test costs.)
inline std::string upload_form(const std::string& filename, const std::string& bytes,
                        const std::vector<std::pair<std::string, std::string>>& fields = {}) {
  std::string body;
  body.reserve(bytes.size() + 1024);
  body += "--" + form_boundary + "\r\nContent-Disposition: form-data; name=\"image\"; filename=\"" +
          filename + "\"\r\nContent-Type: image/png\r\n\r\n";
  body += bytes;
  body += "\r\n";
  for (const auto& [name, value] : fields)
    body += "--" + form_boundary + "\r\nContent-Disposition: form-data; name=\"" + name +
            "\"\r\n\r\n" + value + "\r\n";
  return body + "--" + form_boundary + "--\r\n";
}

inline orch::testing::reply upload(const serve_process& s, const std::string& filename,
                            const std::string& bytes,
                            const std::vector<std::pair<std::string, std::string>>& fields = {}) {
  return s.send(orch::testing::http::verb::post, "/upload/image",
                upload_form(filename, bytes, fields), form_type);
}

// A connection to `s` from `address` (a loopback alias: 127.0.0.2 is another peer to the server).
inline std::unique_ptr<tcp::socket> connect_from(boost::asio::io_context& io,
                                                 const serve_process& s,
                                                 const std::string& address = "127.0.0.1") {
  auto sock = std::make_unique<tcp::socket>(io);
  sock->open(tcp::v4());
  sock->bind({boost::asio::ip::make_address(address), 0});
  sock->connect({boost::asio::ip::make_address("127.0.0.1"), s.port()});
  return sock;
}

// Whether the server has closed `sock` (its end of stream is there to read), waiting up to 5 s.
inline bool closed_by_server(tcp::socket& sock) {
  pollfd p{sock.native_handle(), POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 5000) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

// A process's resident set (`key` VmRSS:), or its peak (VmHWM:), in KiB (0 when it is gone).
inline std::uint64_t rss_kib(pid_t pid, const std::string& key = "VmRSS:") {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string field;
  while (in >> field) {
    if (field == key) {
      std::uint64_t kib = 0;
      in >> kib;
      return kib;
    }
    std::getline(in, field);
  }
  return 0;
}

}  // namespace orch::serve_testing
