// The worker runtime's C API (worker/include/orch/worker/worker.h) as a Python worker reaches it:
// dlopen, symbols under their versions, and the two-step start's refusals. A started worker is
// exercised end to end by every Python-worker test (tests/integration/python).
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "orch/worker/worker.h"

namespace {

class worker_api : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = ::dlopen(ORCH_TEST_WORKER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << ::dlerror();
    begin_ = reinterpret_cast<decltype(&orch_worker_begin)>(
        ::dlvsym(handle_, "orch_worker_begin", "ORCH_WORKER_1.1"));
    serve_ = reinterpret_cast<decltype(&orch_worker_serve)>(
        ::dlvsym(handle_, "orch_worker_serve", "ORCH_WORKER_1.1"));
    ASSERT_NE(begin_, nullptr);
    ASSERT_NE(serve_, nullptr);
  }
  // Never dlclose'd, as a Python worker never unloads it: once the library has set up its log,
  // its static loggers are destroyed at exit, which needs the code still mapped.
  // orch_worker_begin over `args` (argv[0] added); the handle must be null: its status.
  int refused(std::vector<const char*> args) {
    args.insert(args.begin(), "python3");
    std::int32_t status = -1;
    orch_worker* w = begin_(static_cast<int>(args.size()), args.data(), &status);
    EXPECT_EQ(w, nullptr);
    return status;
  }

  void* handle_ = nullptr;
  decltype(&orch_worker_begin) begin_ = nullptr;
  decltype(&orch_worker_serve) serve_ = nullptr;
};

TEST_F(worker_api, the_first_versions_symbols_stay_and_internals_are_hidden) {
  EXPECT_NE(::dlvsym(handle_, "orch_worker_main", "ORCH_WORKER_1"), nullptr);
  EXPECT_NE(::dlvsym(handle_, "orch_worker_run", "ORCH_WORKER_1"), nullptr);
  EXPECT_NE(::dlvsym(handle_, "orch_worker_log", "ORCH_WORKER_1"), nullptr);
  EXPECT_EQ(::dlvsym(handle_, "orch_worker_begin", "ORCH_WORKER_1"), nullptr)
      << "a function is added in a new version node, never to an old one";
  // orch::worker::run_worker, as the compiler names it: defined in the library, not exported.
  EXPECT_EQ(::dlsym(handle_, "_ZN4orch6worker10run_workerERK19orch_worker_options"), nullptr);
}

TEST_F(worker_api, help_and_usage_errors_end_before_anything_starts) {
  EXPECT_EQ(refused({"--help"}), ORCH_WORKER_EXIT_OK);
  EXPECT_EQ(refused({"--bogus", "1"}), ORCH_WORKER_EXIT_USAGE);
  EXPECT_EQ(refused({"--env", "x"}), ORCH_WORKER_EXIT_USAGE);  // no fds, no token
  EXPECT_EQ(refused({}), ORCH_WORKER_EXIT_USAGE);
  EXPECT_EQ(serve_(nullptr, nullptr, nullptr), ORCH_WORKER_EXIT_USAGE);
}

TEST_F(worker_api, a_fd_socket_that_carries_no_segments_is_a_handshake_failure) {
  // Everything parses (--library is not needed: the node set comes to orch_worker_serve), the
  // token is read from its pipe, and then the host sends no segment fds: the socket is closed.
  int token[2];
  ASSERT_EQ(::pipe(token), 0);
  ASSERT_EQ(::write(token[1], "tok", 3), 3);
  ::close(token[1]);
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  ::close(pair[1]);
  const std::string fd = std::to_string(pair[0]), token_fd = std::to_string(token[0]);
  EXPECT_EQ(refused({"--channel-fd", fd.c_str(), "--fd-socket", fd.c_str(), "--token-fd",
                     token_fd.c_str(), "--generation", "1", "--env", "api-test"}),
            ORCH_WORKER_EXIT_HANDSHAKE);
  ::close(pair[0]);
  EXPECT_EQ(::fcntl(token[0], F_GETFD), -1) << "the token pipe is closed once read";
}

}  // namespace
