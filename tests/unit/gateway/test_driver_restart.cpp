// The Ray host source (host_source.hpp) over a real child in the driver's place: a shell script
// that speaks the driver's protocol. A driver that exits on its own is reaped at once (no
// zombie), the hosts it had said up are reported down with its exit named, and it is started
// again; stop() ends the running one through its stdin.
#include <gtest/gtest.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "orch/gateway/host_source.hpp"

namespace orch::gateway {
namespace {

namespace fs = std::filesystem;

class driver_restart : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/orch-driver-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    io_thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    work_.reset();
    io_thread_.join();
    fs::remove_all(dir_);
  }
  // The stand-in: each run appends its pid to `pids`; the first says host-0 and host-1 are up
  // and exits 3, the next says host-0 is up and waits for the end of its input.
  fs::path write_driver() {
    const fs::path script = dir_ / "driver.sh";
    std::ofstream(script) << "#!/bin/bash\n"
                             "echo $$ >> '" << (dir_ / "pids").string() << "'\n"
                             "runs=$(wc -l < '" << (dir_ / "pids").string() << "')\n"
                             "echo '{\"event\":\"host_up\",\"host\":\"host-0\",\"url\":\"http://127.0.0.1:1\"}'\n"
                             "if [ \"$runs\" = 1 ]; then\n"
                             "  echo '{\"event\":\"host_up\",\"host\":\"host-1\",\"url\":\"http://127.0.0.1:2\"}'\n"
                             "  echo 'lost the Ray head' >&2\n"
                             "  exit 3\n"
                             "fi\n"
                             "cat > /dev/null\n"
                             "echo stopped > '" << (dir_ / "stopped").string() << "'\n";
    fs::permissions(script, fs::perms::owner_all);
    return script;
  }
  std::vector<pid_t> pids() const {
    std::vector<pid_t> found;
    std::ifstream in(dir_ / "pids");
    for (pid_t p = 0; in >> p;) found.push_back(p);
    return found;
  }
  std::vector<host_event> events() {
    std::lock_guard lock(mutex_);
    return events_;
  }
  // Until `done` holds, a hang guard of 30 s.
  template <typename Done>
  bool wait_until(Done done) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  fs::path dir_;
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
      io_.get_executor()};
  std::thread io_thread_;
  std::mutex mutex_;
  std::vector<host_event> events_;
};

TEST_F(driver_restart, a_driver_that_exits_is_reaped_its_hosts_go_down_and_it_starts_again) {
  ray_hosts ray;
  ray.python = write_driver();
  ray.address = "127.0.0.1:6379";
  ray.deployment = dir_ / "deployment.toml";
  ray.comfy_orch = "/bin/true";
  ray_host_source source(ray, std::nullopt, std::chrono::seconds(20),
                         std::chrono::milliseconds(10));
  ASSERT_TRUE(source.start(io_, [this](const host_event& e) {
    std::lock_guard lock(mutex_);
    events_.push_back(e);
  }));
  ASSERT_TRUE(wait_until([&] { return events().size() == 5; })) << events().size();
  const auto seen = events();
  const auto is = [](const host_event& e, host_event::kind k, const char* host) {
    return e.what == k && e.host == host;
  };
  EXPECT_TRUE(is(seen[0], host_event::kind::up, "host-0"));
  EXPECT_TRUE(is(seen[1], host_event::kind::up, "host-1"));
  EXPECT_TRUE(is(seen[2], host_event::kind::down, "host-0"));
  EXPECT_TRUE(is(seen[3], host_event::kind::down, "host-1"));
  EXPECT_NE(seen[2].reason.find("the Ray driver exited with code 3"), std::string::npos)
      << seen[2].reason;
  EXPECT_TRUE(is(seen[4], host_event::kind::up, "host-0"));
  const auto runs = pids();
  ASSERT_EQ(runs.size(), 2u);
  // Reaped: a zombie would still answer signal 0.
  EXPECT_NE(::kill(runs[0], 0), 0) << "the first run was not reaped";
  source.stop();
  std::string said;
  std::ifstream(dir_ / "stopped") >> said;
  EXPECT_EQ(said, "stopped") << "the second run did not see the end of its input";
  EXPECT_NE(::kill(runs[1], 0), 0) << "the second run outlived stop()";
}

}  // namespace
}  // namespace orch::gateway
