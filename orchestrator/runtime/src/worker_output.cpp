#include "orch/runtime/worker_output.hpp"

#include <unistd.h>

#include <array>

#include <boost/asio/posix/stream_descriptor.hpp>

#include "orch/support/untrusted_text.hpp"

namespace orch::runtime {

namespace {

void to_stderr(std::string_view line) {
  // One write per line, so lines of several workers and the host's log never interleave inside.
  std::string text(line);
  text += '\n';
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

struct worker_output::impl {
  impl(boost::asio::io_context& io, int fd, std::string e, output_limits l, line_sink s)
      : pipe(io, fd), env(std::move(e)), limits(l), sink(s ? std::move(s) : line_sink(to_stderr)),
        tokens(static_cast<double>(l.burst)), refilled(std::chrono::steady_clock::now()) {}

  boost::asio::posix::stream_descriptor pipe;
  std::string env;
  output_limits limits;
  line_sink sink;
  std::array<char, 16384> buffer{};
  std::string partial;
  bool cutting = false;  // the current line passed max_line: the rest of it is dropped
  double tokens;
  std::chrono::steady_clock::time_point refilled;
  std::size_t dropped_lines = 0;
  std::size_t dropped_bytes = 0;

  void say_dropped() {
    if (dropped_lines == 0) return;
    sink("[comfy-orch] worker " + env + ": " + std::to_string(dropped_lines) + " line(s), " +
         std::to_string(dropped_bytes) + " bytes of its output dropped (over " +
         std::to_string(limits.bytes_per_second) + " bytes/s)");
    dropped_lines = dropped_bytes = 0;
  }

  void line(std::string_view raw) {
    const auto now = std::chrono::steady_clock::now();
    tokens = std::min(static_cast<double>(limits.burst),
                      tokens + std::chrono::duration<double>(now - refilled).count() *
                                   static_cast<double>(limits.bytes_per_second));
    refilled = now;
    const double cost = static_cast<double>(raw.size() + 1);
    if (tokens < cost) {
      ++dropped_lines;
      dropped_bytes += raw.size() + 1;
      return;
    }
    tokens -= cost;
    say_dropped();
    sink(escaped(raw, limits.max_line));
  }

  void take(std::string_view data) {
    while (!data.empty()) {
      const auto nl = data.find('\n');
      const std::string_view piece = data.substr(0, nl);
      if (!cutting) {
        const std::size_t room = limits.max_line + 1 - partial.size();
        partial.append(piece.substr(0, std::min(room, piece.size())));
        cutting = partial.size() > limits.max_line;
      }
      if (nl == std::string_view::npos) return;
      line(partial);
      partial.clear();
      cutting = false;
      data.remove_prefix(nl + 1);
    }
  }

  void finish() {
    if (!partial.empty()) line(partial);
    partial.clear();
    say_dropped();
  }
};

std::string worker_output::escaped(std::string_view raw, std::size_t max_line) {
  // C1 controls, bidi overrides and bytes that are not UTF-8 too, not only C0 (issue 55).
  std::string out = printable(raw.substr(0, std::min(raw.size(), max_line)));
  if (raw.size() > max_line) out += " [cut at " + std::to_string(max_line) + " bytes]";
  return out;
}

worker_output::worker_output(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
worker_output::~worker_output() = default;

std::shared_ptr<worker_output> worker_output::start(boost::asio::io_context& io,
                                                    ipc::unique_fd read_end, std::string env,
                                                    output_limits limits, line_sink sink) {
  auto out = std::make_shared<worker_output>(std::make_unique<impl>(
      io, read_end.release(), std::move(env), limits, std::move(sink)));
  struct reader {
    std::shared_ptr<worker_output> self;
    void operator()(boost::system::error_code ec, std::size_t n) const {
      auto& i = *self->impl_;
      if (n > 0) i.take(std::string_view(i.buffer.data(), n));
      if (ec) {  // end of file (every writer exited), or stop()
        i.finish();
        boost::system::error_code ignored;
        i.pipe.close(ignored);
        return;
      }
      i.pipe.async_read_some(boost::asio::buffer(i.buffer), reader{self});
    }
  };
  out->impl_->pipe.async_read_some(boost::asio::buffer(out->impl_->buffer), reader{out});
  return out;
}

void worker_output::drain_and_stop() {
  auto& i = *impl_;
  if (!i.pipe.is_open()) return;
  boost::system::error_code ec;
  i.pipe.non_blocking(true, ec);
  while (!ec) {
    const std::size_t n = i.pipe.read_some(boost::asio::buffer(i.buffer), ec);
    if (n > 0) i.take(std::string_view(i.buffer.data(), n));
  }
  i.finish();
  i.pipe.close(ec);
}

bool worker_output::open() const { return impl_->pipe.is_open(); }

}  // namespace orch::runtime
