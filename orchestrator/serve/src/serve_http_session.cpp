// serve_http_session's members (serve_http_session.hpp): a request's header, its body and its
// dispatch, the answer written as it is, in pieces or from a file, the connection's end.
#include "serve_http_session.hpp"

namespace orch::serve {

void http_session::on_header(beast::error_code ec) {
  if (ec == http::error::header_limit)
    return refuse(431, "the request header is too large");
  if (ec) return close();  // timeout, reset, end of stream, garbage: nothing to answer
  if (refuse_) return refuse(503, "too many connections");
  const auto& req = header_->get();
  view_ = http_request{};
  view_.method = std::string(req.method_string());
  view_.target = std::string(req.target());
  split_target(view_.target, view_);
  // A fleet host answers its gateway alone: before any route, WebSocket upgrades included, and
  // before the body is read (fleet_auth.hpp).
  if (const auto& fleet = st_->limits.fleet) {
    std::vector<std::string_view> authorization;
    for (const auto& field : req)
      if (field.name() == http::field::authorization)
        authorization.emplace_back(field.value().data(), field.value().size());
    if (const auto why = fleet->judge(authorization))
      return refuse(fleet_refusal_reply(*why, peer_.to_string(), view_.method, view_.path));
  }
  for (const auto& field : req)  // the fleet's secret is never handed on to a pack's route
    if (!(st_->limits.fleet && field.name() == http::field::authorization))
      view_.fields.emplace_back(std::string(field.name_string()), std::string(field.value()));
  // Before anything runs, WebSocket upgrades included (docs/security.md).
  const std::string host(req[http::field::host]);
  const std::string origin(req[http::field::origin]);
  if (!st_->limits.cors_origin && cross_origin_refused(host, origin)) {
    spdlog::warn("serve: request with non matching host and origin {} != {}, returning 403",
                 printable(host), printable(origin));
    return refuse(403, "cross-origin request refused: its Origin is not this server "
                       "(comfy-orch serve --enable-cors-header allows it)");
  }
  const body_rule rule = st_->limits.body_rule_for
                             ? st_->limits.body_rule_for(view_.method, view_.path)
                             : body_rule{st_->limits.max_body};
  limit_ = rule.limit;
  const auto length = header_->content_length();
  if (length && *length > limit_) return refuse(413, too_large());
  // The bodies being received have a budget, those held in memory and those spooled to disk
  // each their own, so that many large uploads stalled near their end can take neither the
  // machine's memory nor its disk (S13); charged as their bytes arrive (read_body).
  const bool has_body = !header_->is_done();
  const bool spool = rule.spooled && has_body;
  hold(body_, spool ? &st_->spooled : &st_->bodies);
  const bool go_on_asked = has_body && beast::iequals(req[http::field::expect], "100-continue");
  const unsigned version = req.version();
  if (spool) {
    if (auto s = spool_body(); !s) {
      spdlog::error("serve: {}", s.err().message);
      return refuse(500, "the server cannot keep the request body: " + s.err().message);
    }
  } else {
    in_memory_.emplace(std::move(*header_));
    in_memory_->body_limit(limit_);  // a chunked body's cap, counted chunk by chunk
  }
  header_.reset();
  // Beast reads what fits in the buffer's free capacity (up to 64 KiB): after a header, that
  // is a few hundred bytes, and a 60 MiB upload would take 100000 reads.
  if (has_body) buffer_.reserve(std::size_t{64} << 10);
  if (go_on_asked) {
    // curl asks before it sends a body past 1 MiB, and waits a second for the answer.
    auto go_on =
        std::make_shared<http::response<http::empty_body>>(http::status::continue_, version);
    stream_.expires_after(st_->limits.header_timeout);
    http::async_write(stream_, *go_on,
                      [self = shared_from_this(), go_on](beast::error_code e, std::size_t) {
                        if (e) return self->close();
                        self->read_body();
                      });
    return;
  }
  read_body();
}

status http_session::spool_body() {
  auto fd = open_spool_file(st_->limits.spool_directory);
  if (!fd) return fd.err();
  spooled_.emplace(std::move(*header_));
  spooled_->body_limit(limit_);
  beast::file file;
  file.native_handle(fd->release());
  beast::error_code ec;
  spooled_->get().body().reset(std::move(file), ec);
  if (ec) return error{serve_errc::file_io_failed, "a spooled request body: " + ec.message()};
  return ok_status();
}

void http_session::read_body() {
  if (spooled_) return read_body(*spooled_);
  read_body(*in_memory_);
}

void http_session::on_message() {
  waiting_since_.reset();  // its request is in: it is being answered
  body_.moving = false;
  if (spooled_) {
    auto req = spooled_->release();
    http_request view = std::move(view_);
    view.content_type = std::string(req[http::field::content_type]);
    view.usage_source = std::string(req["Comfy-Usage-Source"]);
    // The message's file closes its own descriptor; the handler gets one of its own.
    view.body_file = std::make_shared<ipc::unique_fd>(
        ::fcntl(req.body().file().native_handle(), F_DUPFD_CLOEXEC, 0));
    return dispatch(std::move(view), req.version(), req.keep_alive());
  }
  auto req = in_memory_->release();
  if (websocket::is_upgrade(req)) return upgrade(std::move(req));
  if (req.method() == http::verb::options)  // a preflight: answered, as ComfyUI does
    return write({200, "text/plain", "", {}, nullptr}, req.version(), req.keep_alive(), false);
  http_request view = std::move(view_);
  view.body = std::move(req.body());
  view.content_type = std::string(req[http::field::content_type]);
  view.usage_source = std::string(req["Comfy-Usage-Source"]);
  dispatch(std::move(view), req.version(), req.keep_alive());
}

void http_session::dispatch(http_request view, unsigned version, bool keep_alive) {
  if (st_->at_once && !view.body_file && view.body.size() <= http_server::max_body_at_once) {
    if (auto now = answer(view, st_->at_once))
      return reply(method_and_path(view), std::move(*now), version, keep_alive);
  }
  stream_.expires_never();  // the handler may take long (an upload stored)
  boost::asio::post(st_->api, [self = shared_from_this(), view = std::move(view), version,
                               keep_alive]() mutable {
    http_reply r = *answer(view, [&](const http_request& q) {
      return std::optional<http_reply>(self->st_->on_request(q));
    });
    // An upload's body is not kept while the answer is written.
    boost::asio::post(self->st_->io, [self, about = method_and_path(view), r = std::move(r),
                                      version, keep_alive]() mutable {
      self->reply(std::move(about), std::move(r), version, keep_alive);
    });
  });
}

void http_session::reply(http_request about, http_reply r, unsigned version, bool keep_alive) {
  if (!r.later) return write(std::move(r), version, keep_alive, false);
  stream_.expires_never();  // it waits for a worker
  boost::asio::post(st_->waiting, [self = shared_from_this(), about = std::move(about),
                                   later = std::move(r.later), version, keep_alive]() mutable {
    http_reply done = *answer(about, [&](const http_request&) {
      return std::optional<http_reply>(later());
    });
    done.later = nullptr;  // one wait at most
    boost::asio::post(self->st_->io, [self, done = std::move(done), version,
                                      keep_alive]() mutable {
      self->write(std::move(done), version, keep_alive, false);
    });
  });
}

void http_session::upgrade(http::request<http::string_body> req) {
  // ComfyUI serves every route under /api too, the WebSocket included.
  if (view_.path != "/ws" && view_.path != "/api/ws") return refuse(404, "no websocket here");
  if (!make_ws_room(*st_, peer_)) return refuse(503, "too many websocket clients");
  ++st_->ws_pending;
  std::string sid = view_.query.count("clientId") ? view_.query["clientId"] : std::string();
  if (sid.empty() || sid.size() > 128) sid = new_sid();
  upgraded_ = true;  // the connection is counted on by the websocket session now
  auto ws = std::make_shared<ws_session>(std::move(stream_), st_, std::move(sid), peer_);
  ws->start(std::move(req));
}

void http_session::write(http_reply reply, unsigned version, bool keep_alive, bool linger) {
  keep_alive = keep_alive && !linger && !st_->stopping;
  hold(answer_, nullptr);  // a file or a stream holds no memory while it waits: not charged
  if (reply.pieces) return stream(std::move(reply), version, keep_alive, linger);
  if (reply.forward) return relay(std::move(reply.forward), version, keep_alive);
  if (reply.file && reply.file->valid()) {
    auto out = std::make_shared<outgoing<http::file_body>>(
        http::response<http::file_body>(static_cast<http::status>(reply.status), version));
    beast::file file;
    file.native_handle(reply.file->release());
    beast::error_code ec;
    out->res.body().reset(std::move(file), ec);
    if (!ec) {
      set_fields(out->res, reply, keep_alive);
      out->res.prepare_payload();
      return send(std::move(out), linger);
    }
    reply = {500, "application/json", error_body("cannot read the file: " + ec.message()), {},
             nullptr};
  }
  hold(answer_, &st_->answers);
  if (!grow(answer_, reply.body.size()))
    reply = {503, "application/json",
             error_body("too many answer bytes are being written at once; retry shortly"), {},
             nullptr};
  auto out = std::make_shared<outgoing<http::string_body>>(
      http::response<http::string_body>(static_cast<http::status>(reply.status), version));
  set_fields(out->res, reply, keep_alive);
  out->res.body() = std::move(reply.body);
  out->res.prepare_payload();
  send(std::move(out), linger);
}

void http_session::stream(http_reply reply, unsigned version, bool keep_alive, bool linger) {
  auto out = std::make_shared<streamed>();
  out->res = http::response<http::empty_body>(static_cast<http::status>(reply.status), version);
  set_fields(out->res, reply, keep_alive);
  out->res.chunked(true);
  out->pieces = std::move(reply.pieces);
  out->header.emplace(out->res);
  hold(answer_, &st_->answers);
  waiting_since_ = std::chrono::steady_clock::now();
  stream_.expires_at(answer_deadline());
  http::async_write_header(stream_, *out->header,
                           [self = shared_from_this(), out, linger](beast::error_code ec,
                                                                    std::size_t n) {
                             if (ec) return self->close();
                             self->answer_.moved += n;
                             self->next_piece(out, linger);
                           });
}

void http_session::next_piece(const std::shared_ptr<streamed>& out, bool linger) {
  if (!answer_.budget) return;  // closed (to make room) while its last piece was written
  std::optional<std::string> piece;
  try {
    do piece = out->pieces();
    while (piece && piece->empty());  // an empty chunk would end the body
  } catch (const std::exception& e) {
    spdlog::error("serve: an answer could not be written whole: {}", e.what());
    return close();  // its client sees the body cut short, not a complete wrong one
  }
  const bool last = !piece;
  out->piece = last ? std::string() : std::move(*piece);
  // The last piece's charge goes back before this one's is taken.
  answer_.budget->release(peer_, answer_.charged);
  answer_.charged = 0;
  if (!grow(answer_, out->piece.size())) return close();
  waiting_since_ = std::chrono::steady_clock::now();
  stream_.expires_at(answer_deadline());
  const auto done = [self = shared_from_this(), out, linger, last](beast::error_code ec,
                                                                  std::size_t n) {
    if (ec) return self->close();
    self->answer_.moved += n;
    if (last) return self->answered(out->res.keep_alive(), linger);
    self->next_piece(out, linger);
  };
  if (last) return boost::asio::async_write(stream_, http::make_chunk_last(), done);
  boost::asio::async_write(stream_, http::make_chunk(boost::asio::buffer(out->piece)), done);
}

void http_session::answered(bool keep_alive, bool linger) {
  release(answer_);
  if (linger) return this->linger();
  if (!keep_alive) return close();
  await_next_request();
}

void http_session::await_next_request() {
  waiting_since_ = std::chrono::steady_clock::now();
  if (buffer_.size() > 0) return start(st_->limits.header_timeout);  // already begun
  stream_.expires_after(st_->limits.idle_timeout);
  stream_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                            if (ec) return self->close();
                            self->buffer_.commit(n);
                            self->start(self->st_->limits.header_timeout);
                          });
}

void http_session::linger() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return close();
  stream_.expires_after(st_->limits.header_timeout);
  drain_.resize(std::size_t{1} << 20);
  drain();
}

void http_session::drain() {
  stream_.async_read_some(boost::asio::buffer(drain_),
                          [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                            self->drained_ += n;
                            if (ec || self->drained_ > linger_bytes) return self->close();
                            self->drain();
                          });
}

void http_session::refuse(unsigned status, const std::string& message) {
  refuse({status, "application/json", error_body(message), {}, nullptr});
}

void http_session::refuse(http_reply reply) {
  const bool unread = spooled_     ? !spooled_->is_done()
                      : in_memory_ ? !in_memory_->is_done()
                               : header_ && !header_->is_done();
  release(body_);  // what was read of it is not kept
  write(std::move(reply), 11, false, unread);
}

}  // namespace orch::serve
