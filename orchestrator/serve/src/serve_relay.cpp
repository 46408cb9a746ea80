// The session's relay of a pack's aiohttp route (serve_http_session.hpp, serve_upstream.hpp):
// the request to the worker that serves it, the worker's answer back to the client as it comes.
#include "serve_http_session.hpp"

namespace orch::serve {

namespace {

// A hop's own headers (RFC 9110 7.6.1), never forwarded.
bool hop_by_hop(beast::string_view name) {
  for (const char* hop : {"connection", "keep-alive", "proxy-authenticate",
                          "proxy-authorization", "te", "trailer", "transfer-encoding",
                          "upgrade", "proxy-connection"})
    if (beast::iequals(name, hop)) return true;
  return false;
}

}  // namespace

void http_session::relay(std::shared_ptr<forwarded_request> f, unsigned version,
                       bool keep_alive) {
  http::request<http::empty_body> head(http::string_to_verb(f->request.method),
                                       f->request.target, 11);
  if (head.method() == http::verb::unknown) head.method_string(f->request.method);
  for (const auto& [name, value] : f->request.fields)
    if (!hop_by_hop(name) && !beast::iequals(name, "content-length")) head.set(name, value);
  auto upstream = std::make_shared<upstream_exchange>(st_->io, f->socket);
  stream_.expires_never();  // the pack's handler may take long
  waiting_since_.reset();
  hold(answer_, &st_->answers);
  if (!grow(answer_, upstream_exchange::piece_size))
    return write({503, "application/json",
                  error_body("too many answer bytes are being written at once; retry shortly"),
                  {}, nullptr},
                 version, false, false);
  upstream->start(std::move(head), std::move(f->request.body), f->request.body_file,
                  [self = shared_from_this(), upstream, f, version,
                   keep_alive](beast::error_code ec) {
                    if (ec) {
                      spdlog::warn("serve: {} {}: the worker of env {} did not answer: {}",
                                   f->request.method, printable(f->request.path), f->env,
                                   ec.message());
                      return self->write({502, "application/json",
                                          error_body("the worker of env " + f->env +
                                                     ", which serves this route, did not "
                                                     "answer (" + ec.message() +
                                                     "); it restarts after a loss: try again "
                                                     "shortly"),
                                          {}, nullptr},
                                         version, keep_alive, false);
                    }
                    self->relay_head(upstream, version, keep_alive);
                  });
}

void http_session::relay_head(const std::shared_ptr<upstream_exchange>& upstream,
                            unsigned version, bool keep_alive) {
  const auto& answer = upstream->answer();
  auto out = std::make_shared<streamed>();
  out->res = http::response<http::empty_body>(answer.result(), version);
  out->res.reason(answer.reason());
  for (const auto& field : answer)
    if (!hop_by_hop(field.name_string()) && field.name() != http::field::content_length)
      out->res.insert(field.name_string(), field.value());
  const auto length = upstream->content_length();
  if (length) out->res.content_length(*length);
  else out->res.chunked(!upstream->finished());
  out->res.keep_alive(keep_alive && !st_->stopping);
  out->header.emplace(out->res);
  waiting_since_ = std::chrono::steady_clock::now();
  stream_.expires_at(answer_deadline());
  http::async_write_header(stream_, *out->header,
                           [self = shared_from_this(), out, upstream](beast::error_code ec,
                                                                      std::size_t n) {
                             if (ec) return self->close();
                             self->answer_.moved += n;
                             self->relay_piece(out, upstream);
                           });
}

void http_session::relay_piece(const std::shared_ptr<streamed>& out,
                             const std::shared_ptr<upstream_exchange>& upstream) {
  if (!answer_.budget) return;  // closed to make room
  stream_.expires_never();  // waiting on the worker, not on its client
  waiting_since_.reset();
  upstream->read_some([self = shared_from_this(), out, upstream](beast::error_code ec,
                                                                 std::string_view piece) {
    if (ec) return self->close();  // the worker failed mid-answer: its body cut short
    const bool chunked = out->res.chunked();
    const bool last = piece.empty() && upstream->finished();
    const auto done = [self, out, upstream, last](beast::error_code e, std::size_t n) {
      if (e) return self->close();
      self->answer_.moved += n;
      if (last) return self->answered(out->res.keep_alive(), false);
      self->relay_piece(out, upstream);
    };
    self->waiting_since_ = std::chrono::steady_clock::now();
    self->stream_.expires_at(self->answer_deadline());
    if (last && chunked) return boost::asio::async_write(self->stream_, http::make_chunk_last(), done);
    if (last) return done({}, 0);
    if (piece.empty()) return self->relay_piece(out, upstream);
    if (chunked)
      return boost::asio::async_write(
          self->stream_, http::make_chunk(boost::asio::buffer(piece.data(), piece.size())),
          done);
    boost::asio::async_write(self->stream_, boost::asio::buffer(piece.data(), piece.size()),
                             done);
  });
}

}  // namespace orch::serve
