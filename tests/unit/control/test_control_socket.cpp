// The control socket and the directory that names the running servers (docs/cli.md): a peer of
// another user refused, the directory's refusals, and registrations that round-trip.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "orch/control/control_client.hpp"
#include "orch/control/control_directory.hpp"
#include "orch/control/control_socket.hpp"

namespace orch::control {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// SO_PEERCRED without a second user: a server told to answer another uid refuses this one.
TEST(control_socket, a_peer_of_another_uid_is_refused_by_name) {
  char tmpl[] = "/tmp/orch-sock-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path path = fs::path(tmpl) / "c.sock";
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  control_limits limits;
  limits.allowed_uid = static_cast<long>(::geteuid()) + 1;
  int asked = 0;
  {
    control_socket server(
        io,
        [&](const json&) {
          return json{{"asked", ++asked}};
        },
        limits);
    ASSERT_TRUE(server.listen(path).ok());
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    auto client = control_client::connect(path.string());
    ASSERT_TRUE(client.ok()) << client.err().message;
    auto answer = client->ask({{"get", "status"}});
    ASSERT_FALSE(answer.ok());
    EXPECT_EQ(answer.err().code, "peer_refused");
    EXPECT_NE(answer.err().message.find("answers only its own user"), std::string::npos);
    EXPECT_EQ(asked, 0) << "the handler never ran for the refused peer";
    server.stop();
  }
  guard.reset();
  io.stop();
  runner.join();
  fs::remove_all(tmpl);
}

class control_directory_test : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/orch-control-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    const char* old = std::getenv("XDG_RUNTIME_DIR");
    if (old != nullptr) old_ = old;
    ::setenv("XDG_RUNTIME_DIR", root_.c_str(), 1);
  }
  void TearDown() override {
    if (old_) {
      ::setenv("XDG_RUNTIME_DIR", old_->c_str(), 1);
    } else {
      ::unsetenv("XDG_RUNTIME_DIR");
    }
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  fs::path root_;
  std::optional<std::string> old_;
};

TEST_F(control_directory_test, is_made_0700_and_refused_when_open_to_others_or_not_a_directory) {
  auto dir = open_control_directory();
  ASSERT_TRUE(dir.ok()) << dir.err().message;
  EXPECT_EQ(*dir, root_ / "comfy-orch");
  struct stat st {};
  ASSERT_EQ(::stat(dir->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  ASSERT_EQ(::chmod(dir->c_str(), 0755), 0);
  auto open = open_control_directory();
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.err().code, "directory_unusable");
  EXPECT_NE(open.err().message.find("chmod 700"), std::string::npos) << open.err().message;

  fs::remove(*dir);
  fs::create_directory(root_ / "elsewhere");
  fs::create_directory_symlink(root_ / "elsewhere", *dir);
  EXPECT_FALSE(open_control_directory().ok()) << "a symlink is refused, not followed";
  EXPECT_FALSE(list_registrations().ok());
}

// A clone or a runtime directory deep enough that "<dir>/comfy-orch/<pid>.sock" would not fit in
// a Unix socket's address (107 bytes): the directory is the short one under /tmp instead, the same
// for serve and for the tools that look for it, and serve can listen there (issue 57).
TEST_F(control_directory_test, a_runtime_directory_too_deep_for_a_socket_gives_a_short_one) {
  const fs::path deep = root_ / std::string(200 - root_.string().size() - 1, 'd');
  ASSERT_EQ(deep.string().size(), 200u);
  fs::create_directories(deep);
  ::setenv("XDG_RUNTIME_DIR", deep.c_str(), 1);
  const fs::path expected = "/tmp/comfy-orch-" + std::to_string(::geteuid());
  EXPECT_EQ(control_directory_path(), expected);
  auto dir = open_control_directory();
  ASSERT_TRUE(dir.ok()) << dir.err().message;
  EXPECT_EQ(*dir, expected);
  EXPECT_LT((*dir / "4194304.sock").string().size(), 108u);

  // One byte under the limit still uses the runtime directory.
  const std::size_t fits = 107 - std::string("/comfy-orch/4194304.sock").size();
  const fs::path shallow = root_ / std::string(fits - root_.string().size() - 1, 's');
  ::setenv("XDG_RUNTIME_DIR", shallow.c_str(), 1);
  EXPECT_EQ(control_directory_path(), shallow / "comfy-orch");
}

TEST_F(control_directory_test, another_users_directory_is_refused) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root can give a directory to another user";
  const fs::path dir = root_ / "comfy-orch";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  auto open = open_control_directory();
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.err().message.find("owned by uid 65534"), std::string::npos) << open.err().message;
}

TEST_F(control_directory_test, registrations_round_trip_and_a_dead_servers_are_removed) {
  auto dir = open_control_directory();
  ASSERT_TRUE(dir.ok());
  server_registration me;
  me.pid = ::getpid();
  me.deployment = "/srv/deployment.toml";
  me.socket = (*dir / "x.sock").string();
  ASSERT_TRUE(write_registration(*dir, me).ok());
  server_registration dead = me;
  dead.pid = 0x3ffffff0;  // above pid_max: no such process
  ASSERT_TRUE(write_registration(*dir, dead).ok());
  std::ofstream(*dir / "junk.json") << "not json";
  auto listed = list_registrations();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().deployment, "/srv/deployment.toml");
  EXPECT_FALSE(listed->front().answering) << "nothing listens at x.sock";
  EXPECT_FALSE(fs::exists(*dir / (std::to_string(dead.pid) + ".json")));
  EXPECT_TRUE(fs::exists(*dir / "junk.json")) << "what is not a registration is left alone";
}

}  // namespace
}  // namespace orch::control
