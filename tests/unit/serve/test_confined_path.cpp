// confined_path: a client's file name and subfolder reach files inside the root and nothing
// else: `..`, absolute paths and NUL bytes are refused as text, and symlinks under the root (of
// the file or of any subfolder, leading out or not) are refused as they are opened.
#include "orch/serve/confined_path.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "orch/serve/errc.hpp"
#include "temp_tree.hpp"

namespace {

using namespace std::string_literals;
using orch::serve::open_confined_directory;
using orch::serve::open_confined_file;
using orch::serve::plain_file_name;
using orch::serve::relative_components;
using orch::testing::read_fd;
using orch::testing::temp_tree;
namespace errc = orch::serve::serve_errc;
using components = std::vector<std::string>;

TEST(confined_path, relative_text_splits_into_components_and_refuses_dotdot_absolute_and_nul) {
  EXPECT_EQ(*relative_components(""), components{});
  EXPECT_EQ(*relative_components("a/b"), (components{"a", "b"}));
  EXPECT_EQ(*relative_components("a//./b/"), (components{"a", "b"}));
  EXPECT_EQ(*relative_components("x..png/..."), (components{"x..png", "..."}));
  for (const std::string& bad : std::vector<std::string>{"..", "../x", "a/../b", "a/..",
                                                         "/etc/passwd", "/", "a\0b"s, "\0"s}) {
    const auto r = relative_components(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.err().code, errc::bad_path) << bad;
  }
}

// S12: an upload makes what is missing, so a path's size is bounded before anything is made.
TEST(confined_path, a_path_too_long_or_too_deep_is_refused_before_anything_is_made) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "b/";
  std::string sixteen;
  for (int i = 0; i < 16; ++i) sixteen += "d/";
  EXPECT_TRUE(relative_components(sixteen).ok());
  for (const std::string& bad : {deep, sixteen + "d", std::string(256, 'x'),
                                 std::string(1025, 'a')}) {
    const auto r = relative_components(bad);
    ASSERT_FALSE(r.ok()) << bad.size();
    EXPECT_EQ(r.err().code, errc::bad_path);
  }
  EXPECT_TRUE(relative_components(std::string(255, 'x')).ok());
}

TEST(confined_path, a_plain_file_name_is_one_component) {
  EXPECT_TRUE(plain_file_name("cat.png").ok());
  EXPECT_TRUE(plain_file_name("..cat").ok());
  for (const std::string& bad :
       std::vector<std::string>{"", ".", "..", "a/b", "/x", "../x", "a\0b"s}) {
    const auto r = plain_file_name(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.err().code, errc::bad_path) << bad;
  }
}

TEST(confined_path, a_file_in_a_subfolder_is_opened_and_absent_things_are_not_found) {
  temp_tree t;
  t.file("root/sub/deeper/a.txt", "hello");
  t.file("root/plain", "x");
  auto dir = open_confined_directory(t / "root", {"sub", "deeper"}, false);
  ASSERT_TRUE(dir.ok()) << dir.err().message;
  auto f = open_confined_file(dir->get(), "a.txt");
  ASSERT_TRUE(f.ok()) << f.err().message;
  EXPECT_EQ(read_fd(f->get()), "hello");
  EXPECT_EQ(open_confined_file(dir->get(), "b.txt").err().code, errc::not_found);
  EXPECT_EQ(open_confined_directory(t / "root", {"nope"}, false).err().code, errc::not_found);
  EXPECT_EQ(open_confined_directory(t / "root", {"plain"}, false).err().code, errc::not_found);
  EXPECT_EQ(open_confined_directory(t / "missing-root", {}, false).err().code,
            errc::directory_unusable);
  auto root = open_confined_directory(t / "root", {}, false);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(open_confined_file(root->get(), "sub").err().code, errc::not_found);  // a directory
}

TEST(confined_path, a_symlinked_file_is_refused_whether_it_leads_out_or_stays_inside) {
  temp_tree t;
  t.file("secret", "outside");
  t.file("root/inside.txt", "inside");
  t.symlink(t / "secret", "root/out.txt");
  t.symlink("inside.txt", "root/in.txt");
  t.symlink("nowhere", "root/dangling.txt");
  auto dir = open_confined_directory(t / "root", {}, false);
  ASSERT_TRUE(dir.ok());
  for (const char* name : {"out.txt", "in.txt", "dangling.txt"}) {
    const auto r = open_confined_file(dir->get(), name);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.err().code, errc::symlink_refused) << name;
  }
}

TEST(confined_path, a_symlinked_subfolder_is_refused_at_any_depth) {
  temp_tree t;
  t.file("outside/secret", "outside");
  t.dir("root/a/b");
  t.symlink(t / "outside", "root/out");
  t.symlink(t / "outside", "root/a/b/out");
  t.symlink("a", "root/alias");
  t.symlink("../../..", "root/a/up");
  for (const auto& path : {components{"out"}, components{"a", "b", "out"}, components{"alias"},
                           components{"a", "up"}}) {
    for (bool create : {false, true}) {
      const auto r = open_confined_directory(t / "root", path, create);
      ASSERT_FALSE(r.ok()) << path.back();
      EXPECT_EQ(r.err().code, errc::symlink_refused) << path.back() << " " << r.err().message;
    }
  }
  // Made through a symlink, a subfolder would land outside: nothing is made there.
  EXPECT_FALSE(open_confined_directory(t / "root", {"out", "new"}, true).ok());
  EXPECT_FALSE(std::filesystem::exists(t / "outside/new"));
}

TEST(confined_path, the_root_itself_may_be_a_symlink_it_is_the_deployments) {
  temp_tree t;
  t.file("real/a.txt", "a");
  t.symlink(t / "real", "link");
  auto dir = open_confined_directory(t / "link", {}, false);
  ASSERT_TRUE(dir.ok()) << dir.err().message;
  EXPECT_TRUE(open_confined_file(dir->get(), "a.txt").ok());
}

TEST(confined_path, create_makes_missing_subfolders_0755_and_a_file_in_the_way_is_not_a_folder) {
  temp_tree t;
  t.dir("root");
  t.file("root/afile", "x");
  const auto old = ::umask(022);
  auto dir = open_confined_directory(t / "root", {"n1", "n2"}, true);
  ::umask(old);
  ASSERT_TRUE(dir.ok()) << dir.err().message;
  struct stat st {};
  ASSERT_EQ(::stat((t / "root/n1/n2").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(open_confined_directory(t / "root", {"afile", "x"}, true).err().code, errc::not_found);
}

TEST(confined_path, a_fifo_is_not_a_file_and_opening_it_does_not_block) {
  temp_tree t;
  t.dir("root");
  ASSERT_EQ(::mkfifo((t / "root/pipe").c_str(), 0644), 0);
  auto dir = open_confined_directory(t / "root", {}, false);
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(open_confined_file(dir->get(), "pipe").err().code, errc::not_found);
}

// The walk holds descriptors: a subfolder swapped for a symlink after it was opened changes
// nothing for what is opened through it.
TEST(confined_path, a_subfolder_swapped_for_a_symlink_after_opening_is_not_followed) {
  temp_tree t;
  t.file("root/sub/a.txt", "inside");
  t.file("outside/a.txt", "outside");
  auto dir = open_confined_directory(t / "root", {"sub"}, false);
  ASSERT_TRUE(dir.ok());
  std::filesystem::rename(t / "root/sub", t / "moved");
  t.symlink(t / "outside", "root/sub");
  auto f = open_confined_file(dir->get(), "a.txt");
  ASSERT_TRUE(f.ok()) << f.err().message;
  EXPECT_EQ(read_fd(f->get()), "inside");
  EXPECT_EQ(open_confined_directory(t / "root", {"sub"}, false).err().code, errc::symlink_refused);
}

}  // namespace
