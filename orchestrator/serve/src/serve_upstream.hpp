// serve_upstream: a request of a pack's aiohttp route, forwarded to the worker that serves it
// (docs/serve.md, "A pack's aiohttp routes"): sent to the Unix socket the host made for that
// worker (worker_web_sockets.hpp) with the client's head and its body, held or spooled, and the
// answer read back a piece at a time as the client takes it, so that neither process holds a
// large file. The session (serve_http_session.hpp) writes what this reads.
#pragma once

#include <array>
#include <cerrno>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include <fcntl.h>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "orch/ipc/unique_fd.hpp"

namespace orch::serve {

class upstream_exchange : public std::enable_shared_from_this<upstream_exchange> {
 public:
  using local = boost::asio::local::stream_protocol;
  using head_done = std::function<void(boost::beast::error_code)>;
  using piece_done = std::function<void(boost::beast::error_code, std::string_view)>;

  upstream_exchange(boost::asio::io_context& io, std::string socket_path)
      : socket_(io), path_(std::move(socket_path)) {
    parser_.header_limit(64 << 10);
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());  // streamed, never held
  }

  // Connects, sends `head` with its body (`body`, or the open file `body_file`), and reads the
  // answer's head; then `done`, and answer() is the worker's status and fields.
  void start(boost::beast::http::request<boost::beast::http::empty_body> head, std::string body,
             std::shared_ptr<ipc::unique_fd> body_file, head_done done) {
    namespace http = boost::beast::http;
    if (head.method() == http::verb::head) parser_.skip(true);
    socket_.async_connect(local::endpoint(path_), [self = shared_from_this(), head = std::move(head),
                                                   body = std::move(body), body_file,
                                                   done = std::move(done)](
                                                      boost::beast::error_code ec) mutable {
      if (ec) return done(ec);
      // Beast reads what fits in the buffer's free capacity: 512 bytes at a time otherwise.
      self->buffer_.reserve(piece_size);
      if (body_file && body_file->valid()) {
        auto req = std::make_shared<http::request<http::file_body>>(std::move(head));
        // A descriptor of its own (closed with the request), never inherited by a worker
        // started meanwhile.
        const int fd = ::fcntl(body_file->get(), F_DUPFD_CLOEXEC, 0);
        if (fd < 0) return done(boost::beast::error_code(errno, boost::system::system_category()));
        boost::beast::error_code opened;
        boost::beast::file file;
        file.native_handle(fd);
        file.seek(0, opened);
        if (!opened) req->body().reset(std::move(file), opened);
        if (opened) return done(opened);
        req->prepare_payload();
        return self->send(req, std::move(done));
      }
      auto req = std::make_shared<http::request<http::string_body>>(std::move(head));
      req->body() = std::move(body);
      req->prepare_payload();
      self->send(req, std::move(done));
    });
  }

  const boost::beast::http::response_parser<boost::beast::http::buffer_body>::value_type&
  answer() const {
    return parser_.get();
  }
  // The answer's Content-Length, when it has one.
  boost::optional<std::uint64_t> content_length() const { return parser_.content_length(); }
  bool finished() const { return parser_.is_done(); }

  // The answer's next piece, valid until the next call; empty once finished().
  void read_some(piece_done done) {
    namespace http = boost::beast::http;
    if (parser_.is_done()) return done({}, {});
    parser_.get().body().data = piece_.data();
    parser_.get().body().size = piece_.size();
    http::async_read_some(socket_, buffer_, parser_,
                          [self = shared_from_this(), done = std::move(done)](
                              boost::beast::error_code ec, std::size_t) {
                            if (ec == http::error::need_buffer) ec = {};
                            if (ec) return done(ec, {});
                            const std::size_t got =
                                self->piece_.size() - self->parser_.get().body().size;
                            done({}, std::string_view(self->piece_.data(), got));
                          });
  }

  static constexpr std::size_t piece_size = std::size_t{64} << 10;

 private:
  template <class Request>
  void send(std::shared_ptr<Request> req, head_done done) {
    namespace http = boost::beast::http;
    http::async_write(socket_, *req, [self = shared_from_this(), req, done = std::move(done)](
                                         boost::beast::error_code ec, std::size_t) mutable {
      if (ec) return done(ec);
      http::async_read_header(self->socket_, self->buffer_, self->parser_,
                              [self, done = std::move(done)](boost::beast::error_code e,
                                                             std::size_t) { done(e); });
    });
  }

  local::socket socket_;
  std::string path_;
  boost::beast::flat_buffer buffer_;
  boost::beast::http::response_parser<boost::beast::http::buffer_body> parser_;
  std::array<char, piece_size> piece_{};
};

}  // namespace orch::serve
