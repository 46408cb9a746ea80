// upload_store: an upload lands whole under its name, or under ComfyUI's `name (N).ext` when
// the name is taken by other bytes; a symlink at the name is never followed; nothing is left
// behind when the write fails.
#include "orch/serve/upload_store.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>

#include <gtest/gtest.h>

#include "orch/serve/confined_path.hpp"
#include "orch/serve/errc.hpp"
#include "temp_tree.hpp"

namespace {

using orch::serve::numbered_name;
using orch::serve::open_confined_directory;
using orch::serve::same_bytes;
using orch::serve::store_upload;
using orch::serve::stored_duplicate;
using orch::testing::temp_tree;
namespace errc = orch::serve::serve_errc;

class upload_store_test : public ::testing::Test {
 protected:
  void SetUp() override {
    t_.dir("in");
    auto d = open_confined_directory(t_ / "in", {}, false);
    ASSERT_TRUE(d.ok());
    dir_ = std::move(*d);
  }
  std::string store(const std::string& name, const std::string& data, bool overwrite) {
    auto r = store_upload(dir_.get(), name, data, overwrite);
    EXPECT_TRUE(r.ok()) << r.err().message;
    return r.ok() ? *r : std::string();
  }
  temp_tree t_;
  orch::ipc::unique_fd dir_;
};

TEST(upload_store, numbered_names_split_as_os_path_splitext_does) {
  EXPECT_EQ(numbered_name("x.png", 1), "x (1).png");
  EXPECT_EQ(numbered_name("x.tar.gz", 2), "x.tar (2).gz");
  EXPECT_EQ(numbered_name("noext", 3), "noext (3)");
  EXPECT_EQ(numbered_name(".hidden", 1), ".hidden (1)");
  EXPECT_EQ(numbered_name("..x.png", 1), "..x (1).png");
  EXPECT_EQ(numbered_name("x.", 1), "x (1).");
}

TEST_F(upload_store_test, a_new_name_is_written_and_no_temporary_file_is_left) {
  EXPECT_EQ(store("x.png", "one", false), "x.png");
  EXPECT_EQ(t_.read("in/x.png"), "one");
  EXPECT_EQ(t_.listing("in"), "x.png");
}

TEST_F(upload_store_test, a_taken_name_gets_the_next_number_unless_it_holds_the_same_bytes) {
  EXPECT_EQ(store("x.png", "one", false), "x.png");
  EXPECT_EQ(store("x.png", "two", false), "x (1).png");
  EXPECT_EQ(store("x.png", "three", false), "x (2).png");
  EXPECT_EQ(store("x.png", "two", false), "x (1).png");  // a duplicate: nothing written
  EXPECT_EQ(store("x.png", "one", false), "x.png");
  EXPECT_EQ(t_.read("in/x.png"), "one");
  EXPECT_EQ(t_.read("in/x (1).png"), "two");
  EXPECT_EQ(t_.read("in/x (2).png"), "three");
  EXPECT_EQ(t_.listing("in"), "x (1).png,x (2).png,x.png");
}

// The gateway's copy of a host's output (place_temporary): a file written under a temporary name
// is placed as an upload is without overwrite, and no temporary file is left in any case.
TEST_F(upload_store_test, a_written_temporary_file_is_placed_as_an_upload_without_overwrite) {
  const auto placed = [&](const std::string& data) {
    auto temp = orch::serve::create_temporary_file(dir_.get());
    EXPECT_TRUE(temp.ok());
    if (!temp.ok()) return std::string();
    EXPECT_EQ(::write(temp->second.get(), data.data(), data.size()),
              static_cast<ssize_t>(data.size()));
    temp->second.reset();
    auto r = orch::serve::place_temporary(dir_.get(), temp->first, "x.png");
    EXPECT_TRUE(r.ok()) << r.err().message;
    return r.ok() ? *r : std::string();
  };
  EXPECT_EQ(placed("one"), "x.png");
  EXPECT_EQ(placed("two"), "x (1).png");
  EXPECT_EQ(placed("one"), "x.png");  // the same bytes: kept once
  EXPECT_EQ(placed("two"), "x (1).png");
  EXPECT_EQ(t_.read("in/x.png"), "one");
  EXPECT_EQ(t_.read("in/x (1).png"), "two");
  EXPECT_EQ(t_.listing("in"), "x (1).png,x.png");
}

// /upload/mask looks for the bytes it received, then stores others under a name of their own.
TEST_F(upload_store_test, a_duplicate_is_found_before_the_first_free_name_and_can_be_passed_over) {
  EXPECT_EQ(store("x.png", "one", false), "x.png");
  EXPECT_EQ(store("x.png", "two", false), "x (1).png");
  const auto found = [&](const std::string& data) {
    auto r = stored_duplicate(dir_.get(), "x.png", data);
    EXPECT_TRUE(r.ok()) << r.err().message;
    return r.ok() && *r ? **r : std::string("none");
  };
  EXPECT_EQ(found("one"), "x.png");
  EXPECT_EQ(found("two"), "x (1).png");
  EXPECT_EQ(found("three"), "none");
  auto r = store_upload(dir_.get(), "x.png", "two", false, same_bytes::pass_over);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(*r, "x (2).png");
  EXPECT_EQ(t_.read("in/x (2).png"), "two");
}

TEST_F(upload_store_test, overwrite_replaces_the_file_under_the_same_name) {
  EXPECT_EQ(store("x.png", "one", false), "x.png");
  EXPECT_EQ(store("x.png", "two", true), "x.png");
  EXPECT_EQ(t_.read("in/x.png"), "two");
  EXPECT_EQ(t_.listing("in"), "x.png");
}

TEST_F(upload_store_test, a_symlink_at_the_name_is_never_followed) {
  t_.file("outside.png", "precious");
  t_.symlink(t_ / "outside.png", "in/x.png");
  // Not overwriting: the link's name is taken, even though its target holds these bytes.
  EXPECT_EQ(store("x.png", "precious", false), "x (1).png");
  EXPECT_EQ(store("x.png", "new", false), "x (2).png");
  EXPECT_EQ(t_.read("outside.png"), "precious");
  // Overwriting: the link itself is replaced by a file; its target is untouched.
  EXPECT_EQ(store("x.png", "new", true), "x.png");
  EXPECT_FALSE(std::filesystem::is_symlink(t_ / "in/x.png"));
  EXPECT_EQ(t_.read("in/x.png"), "new");
  EXPECT_EQ(t_.read("outside.png"), "precious");
}

TEST_F(upload_store_test, a_directory_at_the_name_is_refused_with_overwrite_and_skipped_without) {
  t_.dir("in/x.png");
  const auto r = store_upload(dir_.get(), "x.png", "data", true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::bad_path);
  EXPECT_EQ(store("x.png", "data", false), "x (1).png");
  EXPECT_EQ(t_.listing("in"), "x (1).png,x.png");
}

TEST_F(upload_store_test, a_failed_write_leaves_nothing_behind) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  std::filesystem::permissions(
      t_ / "in", std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  const auto r = store_upload(dir_.get(), "x.png", "data", false);
  std::filesystem::permissions(t_ / "in", std::filesystem::perms::owner_all);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::file_io_failed);
  EXPECT_EQ(t_.listing("in"), "");
}

TEST_F(upload_store_test, a_full_disk_removes_the_temporary_file) {
  // A full file system, as a file size limit: the write fails part way (EFBIG).
  struct rlimit old {};
  ::getrlimit(RLIMIT_FSIZE, &old);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  ::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal
  ::setrlimit(RLIMIT_FSIZE, &small);
  const auto r = store_upload(dir_.get(), "big.bin", std::string(1 << 20, 'b'), false);
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, SIG_DFL);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.err().code, errc::file_io_failed);
  EXPECT_EQ(t_.listing("in"), "");
}

}  // namespace
