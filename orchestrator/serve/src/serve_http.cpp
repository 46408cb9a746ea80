#include "orch/serve/serve_http.hpp"

#include <algorithm>
#include <atomic>
#include <future>
#include <limits>
#include <optional>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "orch/serve/errc.hpp"
#include "serve_http_session.hpp"
#include "serve_http_state.hpp"
#include "serve_ws_session.hpp"

namespace orch::serve {

namespace {

// Whether a new connection from `peer` may be served, after making room for it. When `peer`
// holds its share of the slots, the one of its connections that has waited longest for a request
// it has not finished sending (a header or body coming a byte at a time, an idle keep-alive)
// closes; when every slot is taken, the longest-waiting one of the peer holding the most (or of
// any peer) closes.
// So slow clients cannot keep answerable requests out, and one peer cannot take every slot.
// False when no connection it may close is waiting (then the new one gets 503).
bool make_room(state& st, const boost::asio::ip::address& peer) {
  std::map<boost::asio::ip::address, unsigned> held;
  std::vector<std::shared_ptr<http_session>> live;
  for (const auto& [_, w] : st.sessions)
    if (auto s = w.lock()) {
      ++held[s->peer()];
      live.push_back(std::move(s));
    }
  const bool peer_full = held[peer] >= st.limits.max_connections_per_peer;
  if (!peer_full && st.connections < st.limits.max_connections) return true;
  unsigned most = 0;
  for (const auto& [_, n] : held) most = std::max(most, n);
  const auto longest_waiting = [&](auto&& among) {
    std::shared_ptr<http_session> oldest;
    for (auto& s : live) {
      if (!s->waiting_since() || !among(*s)) continue;
      if (!oldest || *s->waiting_since() < *oldest->waiting_since()) oldest = s;
    }
    return oldest;
  };
  auto victim = peer_full ? longest_waiting([&](const http_session& s) { return s.peer() == peer; })
                          : longest_waiting([&](const http_session& s) {
                              return held[s.peer()] == most;
                            });
  if (!victim && !peer_full) victim = longest_waiting([](const http_session&) { return true; });
  if (!victim) return false;
  victim->close();
  return true;
}

}  // namespace

bool make_ws_room(state& st, const boost::asio::ip::address& peer) {
  std::shared_ptr<ws_session> oldest;
  unsigned held = 0;
  for (const auto& [_, w] : st.ws)
    if (auto s = w.lock(); s && s->peer() == peer) {
      ++held;
      if (!oldest || s->opened() < oldest->opened()) oldest = std::move(s);
    }
  if (held >= st.limits.max_ws_clients_per_peer && oldest) {
    spdlog::warn("serve: {} holds {} websocket clients: its oldest is cut to make room",
                 peer.to_string(), held);
    oldest->cut();
  }
  // Clients still in their handshake count too, or many upgrades at once would all pass.
  return st.ws_count + st.ws_pending < st.limits.max_ws_clients;
}

bool make_budget_room(state& st, const byte_budget& budget, const http_session& asking,
                      bool peer_only, double rate) {
  std::shared_ptr<http_session> slowest;
  // Markedly slower: two readers of one speed had each closed the other to make room, in turn.
  double slowest_rate = rate / 2;
  for (const auto& [_, w] : st.sessions) {
    auto s = w.lock();
    if (!s || s.get() == &asking || (peer_only && s->peer() != asking.peer())) continue;
    if (const auto r = s->rate_holding(budget); r && *r < slowest_rate) {
      slowest = std::move(s);
      slowest_rate = *r;
    }
  }
  if (!slowest) return false;
  spdlog::warn("serve: closed a connection from {} moving {:.0f} B/s to make room for one moving "
               "{:.0f} B/s",
               slowest->peer().to_string(), slowest_rate, rate);
  slowest->close();
  return true;
}

namespace {

void accept_next(const std::shared_ptr<state>& st) {
  st->acceptor.async_accept([st](beast::error_code ec, tcp::socket socket) {
    if (st->stopping) return;
    if (!ec) {
      // Small frames (events, short answers) go out at once: Nagle's delay against the
      // client's delayed ACK cost up to 40 ms per message.
      beast::error_code nodelay;
      socket.set_option(tcp::no_delay(true), nodelay);
      beast::error_code no_peer;
      const auto peer = socket.remote_endpoint(no_peer).address();
      std::erase_if(st->sessions, [](const auto& kv) { return kv.second.expired(); });
      const bool refuse = !make_room(*st, peer);
      ++st->connections;
      auto s = std::make_shared<http_session>(std::move(socket), peer, st, refuse);
      st->sessions[st->next_id++] = s;
      s->start(st->limits.header_timeout);
    } else if (ec != boost::asio::error::operation_aborted) {
      // Out of descriptors (EMFILE) or another transient failure: accepting again at once
      // would spin the io thread. Pause, and let closing connections free their descriptors.
      spdlog::warn("serve: accept failed: {}; retrying in 50 ms", ec.message());
      if (!st->accept_pause) st->accept_pause = std::make_unique<boost::asio::steady_timer>(st->io);
      st->accept_pause->expires_after(std::chrono::milliseconds(50));
      st->accept_pause->async_wait([st](beast::error_code) { accept_next(st); });
      return;
    } else {
      return;  // the acceptor was closed (stop)
    }
    accept_next(st);
  });
}

}  // namespace

http_server::http_server(boost::asio::io_context& io, http_limits limits, handler on_request,
                         at_once_handler at_once, ws_greeting on_ws_connect)
    : state_(std::make_shared<state>(io, limits, std::move(on_request), std::move(at_once),
                                     std::move(on_ws_connect))) {}

http_server::~http_server() { stop(); }

result<std::uint16_t> http_server::listen(const std::string& address, std::uint16_t port) {
  beast::error_code ec;
  const auto ip = boost::asio::ip::make_address(address, ec);
  if (ec) return error{serve_errc::listen_failed, "'" + address + "' is not an IP address"};
  const tcp::endpoint at(ip, port);
  auto& a = state_->acceptor;
  a.open(at.protocol(), ec);
  if (!ec) a.set_option(boost::asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(at, ec);
  if (!ec) a.listen(boost::asio::socket_base::max_listen_connections, ec);
  if (ec) {
    a.close(ec);
    return error{serve_errc::listen_failed,
                 "cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message()};
  }
  const std::uint16_t bound = a.local_endpoint(ec).port();
  boost::asio::post(state_->io, [st = state_] { accept_next(st); });
  return bound;
}

void http_server::send(const std::string& sid, std::string text, bool binary) {
  boost::asio::post(state_->io, [st = state_, sid, text = std::move(text), binary]() mutable {
    if (sid.empty()) {
      for (auto& [_, w] : st->ws)
        if (auto s = w.lock()) s->deliver(text, binary);
    } else if (auto it = st->ws.find(sid); it != st->ws.end()) {
      if (auto s = it->second.lock()) s->deliver(std::move(text), binary);
    }
  });
}

void http_server::send_preview(const std::string& sid, std::string legacy,
                               std::string with_metadata) {
  boost::asio::post(state_->io, [st = state_, sid, legacy = std::move(legacy),
                                 with_metadata = std::move(with_metadata)] {
    const auto to = [&](ws_session& s) {
      s.deliver(s.wants_preview_metadata() ? with_metadata : legacy, true);
    };
    if (sid.empty()) {
      for (auto& [_, w] : st->ws)
        if (auto s = w.lock()) to(*s);
    } else if (auto it = st->ws.find(sid); it != st->ws.end()) {
      if (auto s = it->second.lock()) to(*s);
    }
  });
}

std::size_t http_server::ws_clients() const { return state_->ws_count.load(); }

void http_server::stop() {
  if (stopped_) return;
  stopped_ = true;
  auto closed = std::make_shared<std::promise<void>>();
  auto done = closed->get_future();
  boost::asio::post(state_->io, [st = state_, closed] {
    if (!st->stopping) {
      st->stopping = true;
      st->greet = nullptr;  // what they call is destroyed after stop()
      st->at_once = nullptr;
      beast::error_code ec;
      st->acceptor.close(ec);
      if (st->accept_pause) st->accept_pause->cancel();
      for (auto& [_, w] : st->sessions)
        if (auto s = w.lock()) s->close();
      for (auto& [_, w] : st->ws)
        if (auto s = w.lock()) s->close();
    }
    closed->set_value();
  });
  // The host's io thread runs until the host shuts down, which the caller does after this; a
  // bound keeps a misuse from hanging the process forever.
  if (done.wait_for(std::chrono::seconds(5)) != std::future_status::ready)
    spdlog::error("serve: the io thread did not close the connections within 5 s");
  state_->api.join();
  state_->waiting.join();
}

}  // namespace orch::serve
