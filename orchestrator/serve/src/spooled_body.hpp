// spooled_body: a request body kept on disk instead of in memory (docs/security.md, "Bodies held
// at once"). An upload's body is written, as it arrives, into a file of the deployment's temp
// directory that is unlinked as soon as it is opened: it takes no memory, and nothing of it is
// left behind, however the request or the server ends. Once complete, the body is read through
// a read-only mapping (file pages the kernel may drop, not the server's heap).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string_view>

#include "orch/ipc/unique_fd.hpp"
#include "orch/support/result.hpp"

namespace orch::serve {

// A new, already unlinked file in `dir` for one body, open for reading and writing.
// Errors: file_io_failed (the directory is missing or not writable, ...).
result<ipc::unique_fd> open_spool_file(const std::filesystem::path& dir);

// A spooled body's bytes, mapped read-only for as long as this lives.
class mapped_body {
 public:
  // Errors: file_io_failed.
  static result<mapped_body> map(int fd);
  mapped_body(mapped_body&& other) noexcept;
  mapped_body& operator=(mapped_body&&) = delete;
  mapped_body(const mapped_body&) = delete;
  ~mapped_body();
  std::string_view bytes() const { return {data_, size_}; }

 private:
  mapped_body(const char* data, std::size_t size) : data_(data), size_(size) {}
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace orch::serve
