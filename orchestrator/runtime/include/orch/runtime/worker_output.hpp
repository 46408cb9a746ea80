// worker_output: what a worker writes to its stdout and stderr, read by the host through a pipe
// (docs/security.md, "Worker output"). A worker never writes to the host's own descriptors: a
// node's raw write to fd 1 cannot appear among `comfy-orch run --json`'s events, escape
// sequences cannot reach the operator's terminal, and a node that prints without end cannot
// fill the host's log.
//
// Each line goes to the host's stderr whole (one write), made printable (untrusted_text.hpp:
// C0 and C1 controls and bidi overrides escaped, bytes that are not UTF-8 as U+FFFD),
// cut at max_line bytes. Output past the rate (a token bucket: `burst` bytes at once, refilled
// at `bytes_per_second`) is dropped, and a line says how much once output is let through again
// and when the pipe closes.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>

#include "orch/ipc/unique_fd.hpp"

namespace orch::runtime {

struct output_limits {
  std::size_t max_line = 8192;
  std::size_t burst = std::size_t{4} << 20;
  std::size_t bytes_per_second = std::size_t{256} << 10;
};

class worker_output : public std::enable_shared_from_this<worker_output> {
 public:
  // Where finished lines go: the host's stderr unless a test gives another.
  using line_sink = std::function<void(std::string_view line)>;

  // Starts reading `read_end` on `io`; the reader lives until the pipe closes (every writer, the
  // worker and whatever it left behind, has exited) or stop().
  static std::shared_ptr<worker_output> start(boost::asio::io_context& io, ipc::unique_fd read_end,
                                              std::string env, output_limits limits = {},
                                              line_sink sink = {});
  // Reads what is in the pipe now without waiting, writes it, and closes it (on the io thread,
  // once the worker is reaped: its last lines are not lost).
  void drain_and_stop();
  bool open() const;  // until end of file or drain_and_stop

  // A line as it is written: printable(), cut at `max_line` bytes.
  static std::string escaped(std::string_view raw, std::size_t max_line);

  struct impl;
  explicit worker_output(std::unique_ptr<impl> i);
  ~worker_output();

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace orch::runtime
