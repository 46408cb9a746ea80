// byte_budget: bytes that serve's connections hold at once (request bodies in memory, spooled
// bodies on disk, answers being written), charged as they come, not as they are announced, and
// capped in all and per peer address (docs/security.md, S13 and issue 55's slow senders and
// readers). A connection that cannot be charged makes room by closing a slower holder
// (serve_http.cpp); the first `free_bytes` of each body and answer are not charged, so a small
// request (an /interrupt, a queue clear, a cancel) is never refused for want of budget: what
// they hold is bounded by the connection cap instead. Thread safe: a session may end on the API
// thread.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

#include <boost/asio/ip/address.hpp>

namespace orch::serve {

class byte_budget {
 public:
  // What each body or answer holds uncharged.
  static constexpr std::size_t free_bytes = std::size_t{64} << 10;

  enum class verdict { charged, over_cap, over_share };

  // A peer may hold half of the cap: one address cannot take all of it.
  explicit byte_budget(std::size_t cap) : cap_(cap), share_(cap / 2) {}

  verdict charge(const boost::asio::ip::address& peer, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    if (held_ + bytes > cap_) return verdict::over_cap;
    std::size_t& mine = by_peer_[peer];
    if (mine + bytes > share_) {
      if (mine == 0) by_peer_.erase(peer);
      return verdict::over_share;
    }
    mine += bytes;
    held_ += bytes;
    return verdict::charged;
  }

  void release(const boost::asio::ip::address& peer, std::size_t bytes) {
    if (bytes == 0) return;
    std::lock_guard lock(mutex_);
    held_ -= bytes;
    auto it = by_peer_.find(peer);
    if ((it->second -= bytes) == 0) by_peer_.erase(it);
  }

  std::size_t held() const {
    std::lock_guard lock(mutex_);
    return held_;
  }

  // What a body or an answer of `total` bytes is charged.
  static std::size_t due(std::size_t total) {
    return total > free_bytes ? total - free_bytes : 0;
  }

 private:
  mutable std::mutex mutex_;
  std::size_t cap_;
  std::size_t share_;
  std::size_t held_ = 0;
  std::map<boost::asio::ip::address, std::size_t> by_peer_;
};

}  // namespace orch::serve
