// serve_http_state: what the server and its sessions share (serve_http.cpp and
// serve_ws_session.hpp): the limits, the handlers, the acceptor, the API thread, and the live
// sessions and counts. The maps are touched on the io thread only; the counts are atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include "orch/serve/serve_http.hpp"

namespace orch::orchestrator {

using tcp = boost::asio::ip::tcp;

class http_session;
class ws_session;

// The request bodies being received or answered, held in memory or spooled to disk, each kind
// against its cap (docs/security.md, S13). Atomics: a session may end on the API thread.
class body_budgets {
 public:
  struct reservation {
    std::size_t bytes = 0;
    bool spooled = false;
  };
  explicit body_budgets(const http_limits& limits) : limits_(limits) {}
  // False, with nothing reserved, when `bytes` more would pass the kind's cap.
  bool reserve(reservation r) {
    std::atomic<std::size_t>& held = r.spooled ? spooled_ : memory_;
    const std::size_t cap =
        r.spooled ? limits_.max_spooled_in_flight : limits_.max_bodies_in_flight;
    std::size_t now = held.load();
    do {
      if (now + r.bytes > cap) return false;
    } while (!held.compare_exchange_weak(now, now + r.bytes));
    return true;
  }
  void release(reservation r) { (r.spooled ? spooled_ : memory_) -= r.bytes; }

 private:
  const http_limits& limits_;
  std::atomic<std::size_t> memory_{0};
  std::atomic<std::size_t> spooled_{0};
};

struct http_server::state {
  state(boost::asio::io_context& context, http_limits l, handler h, at_once_handler now,
        ws_greeting g)
      : io(context),
        limits(l),
        on_request(std::move(h)),
        at_once(std::move(now)),
        greet(std::move(g)),
        acceptor(context),
        bodies(limits) {}
  boost::asio::io_context& io;
  http_limits limits;
  handler on_request;
  at_once_handler at_once;
  ws_greeting greet;
  tcp::acceptor acceptor;
  boost::asio::thread_pool api{1};  // every handler, in order of arrival
  boost::asio::thread_pool waiting{1};  // the replies `later`, in order
  // io thread only:
  bool stopping = false;
  std::uint64_t next_id = 0;
  std::map<std::uint64_t, std::weak_ptr<http_session>> sessions;
  std::map<std::string, std::weak_ptr<ws_session>> ws;  // by sid
  std::atomic<unsigned> connections{0};
  std::atomic<unsigned> ws_count{0};
  std::atomic<unsigned> ws_pending{0};  // upgrades whose handshake has not finished
  body_budgets bodies;
  std::unique_ptr<boost::asio::steady_timer> accept_pause;  // after an accept error
};

}  // namespace orch::orchestrator
