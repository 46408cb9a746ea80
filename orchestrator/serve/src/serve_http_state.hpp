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

#include "orch/serve/byte_budget.hpp"
#include "orch/serve/serve_http.hpp"

namespace orch::serve {

using tcp = boost::asio::ip::tcp;

class http_session;
class ws_session;

struct http_server::state {
  state(boost::asio::io_context& context, http_limits l, handler h, at_once_handler now,
        ws_greeting g)
      : io(context),
        limits(l),
        on_request(std::move(h)),
        at_once(std::move(now)),
        greet(std::move(g)),
        acceptor(context),
        bodies(limits.max_bodies_in_flight),
        spooled(limits.max_spooled_in_flight),
        answers(limits.max_answers_in_flight) {}
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
  // Request bodies in memory, bodies spooled to disk, answers being written (byte_budget.hpp).
  byte_budget bodies;
  byte_budget spooled;
  byte_budget answers;
  std::unique_ptr<boost::asio::steady_timer> accept_pause;  // after an accept error
};

// Closes the slowest connection holding bytes of `budget` (of `asking`'s peer alone when
// `peer_only`) that is slower than half of `rate` bytes a second, so that `asking` may be
// charged: a slow sender or reader makes room for a faster one. False when none is found.
bool make_budget_room(http_server::state& st, const byte_budget& budget,
                      const http_session& asking, bool peer_only, double rate);

// Whether a WebSocket client from `peer` may connect (false: every slot is taken), after making
// room for it: past max_ws_clients_per_peer, that peer's oldest client is cut. So one address
// cannot take every slot, and a new tab from a busy address gets in.
bool make_ws_room(http_server::state& st, const boost::asio::ip::address& peer);

}  // namespace orch::serve
