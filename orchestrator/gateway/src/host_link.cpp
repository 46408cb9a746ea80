#include "orch/gateway/host_link.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <stdexcept>
#include <utility>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "orch/gateway/errc.hpp"

namespace orch::gateway {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using asio::use_awaitable;

// The largest event: serve's own cap on what waits for one WebSocket client (its
// --max-ws-queue-bytes default), so a larger one would cut the client it is relayed to anyway.
constexpr std::size_t max_event_bytes = std::size_t{8} << 20;

std::string bearer(const std::string& secret) {
  return "Bearer " + secret;
}

asio::awaitable<host_answer> exchange(tcp::endpoint at, std::string method, std::string target,
                                      std::string body, std::optional<std::string> secret,
                                      std::chrono::milliseconds deadline, std::size_t max_bytes,
                                      std::string body_type) {
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  stream.expires_after(deadline);  // connect, write and read together
  co_await stream.async_connect(at, use_awaitable);
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, at.address().to_string() + ":" + std::to_string(at.port()));
  if (secret) req.set(http::field::authorization, bearer(*secret));
  if (method == "POST") {
    req.set(http::field::content_type, body_type);
    req.body() = std::move(body);
    req.prepare_payload();
  }
  co_await http::async_write(stream, req, use_awaitable);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_bytes);
  // The header first, its length checked here: Boost 1.74's response parser loses its
  // body_limit error when the header and the start of the body arrive in one read (it enters the
  // body state before it checks the length, and goes on parsing), so the cap alone held only
  // when the answer came in pieces.
  co_await http::async_read_header(stream, buffer, parser, use_awaitable);
  if (const auto length = parser.content_length(); length && *length > max_bytes)
    throw boost::system::system_error(http::error::body_limit);
  co_await http::async_read(stream, buffer, parser, use_awaitable);
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  const std::string content_type(parser.get()[http::field::content_type]);
  co_return host_answer{static_cast<unsigned>(parser.get().result_int()),
                        std::move(parser.get().body()), content_type};
}

// The body's cap passed (a download's): told apart from a broken answer.
struct too_large : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(std::string("writing the file: ") + std::strerror(errno));
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

asio::awaitable<host_link::download_answer> fetch_to(tcp::endpoint at, std::string target, int fd,
                                                     std::uint64_t max_bytes,
                                                     std::optional<std::string> secret,
                                                     std::chrono::milliseconds idle_deadline) {
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  stream.expires_after(idle_deadline);
  co_await stream.async_connect(at, use_awaitable);
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, at.address().to_string() + ":" + std::to_string(at.port()));
  if (secret) req.set(http::field::authorization, bearer(*secret));
  stream.expires_after(idle_deadline);
  co_await http::async_write(stream, req, use_awaitable);
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(max_bytes);
  stream.expires_after(idle_deadline);
  // A Content-Length past the cap is refused here, before a byte of the body is read.
  beast::error_code ec;
  co_await http::async_read_header(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
  if (ec == http::error::body_limit)
    throw too_large("its body passes the cap of " + std::to_string(max_bytes) + " bytes");
  if (ec) throw boost::system::system_error(ec);
  host_link::download_answer answer;
  answer.status = static_cast<unsigned>(parser.get().result_int());
  constexpr std::size_t refusal_bytes = 1024;
  std::vector<char> piece(std::size_t{1} << 16);
  while (!parser.is_done()) {
    parser.get().body().data = piece.data();
    parser.get().body().size = piece.size();
    stream.expires_after(idle_deadline);  // an idle deadline: a large file takes its time
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(use_awaitable, ec));
    if (ec == http::error::body_limit)
      throw too_large("its body passes the cap of " + std::to_string(max_bytes) + " bytes");
    if (ec && ec != http::error::need_buffer) throw boost::system::system_error(ec);
    const std::size_t got = piece.size() - parser.get().body().size;
    if (answer.status != 200) {
      answer.refusal.append(piece.data(), std::min(got, refusal_bytes - answer.refusal.size()));
      if (answer.refusal.size() >= refusal_bytes) break;
      continue;
    }
    write_all(fd, piece.data(), got);
    answer.bytes += got;
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  co_return answer;
}

}  // namespace

struct host_link::stream_state {
  explicit stream_state(asio::io_context& io) : ws(io) {}
  websocket::stream<beast::tcp_stream> ws;
  bool closed_by_us = false;
};

// The event stream's coroutine: its arguments by value, as a coroutine's frame keeps them (a
// lambda's captures would die with the lambda, before the frame).
static asio::awaitable<void> read_events(std::shared_ptr<host_link::stream_state> state,
                                         tcp::endpoint at, std::string host,
                                         std::optional<std::string> secret, std::string client_id,
                                         std::function<void()> on_open,
                                         std::function<void(std::string, bool)> on_message) {
  auto& lowest = beast::get_lowest_layer(state->ws);
  lowest.expires_after(std::chrono::seconds(10));
  co_await lowest.async_connect(at, use_awaitable);
  state->ws.set_option(websocket::stream_base::decorator([secret](websocket::request_type& req) {
    if (secret) req.set(http::field::authorization, bearer(*secret));
  }));
  websocket::response_type answer;
  try {
    co_await state->ws.async_handshake(answer, host, "/ws?clientId=" + client_id, use_awaitable);
  } catch (const boost::system::system_error& e) {
    // The host's status says why (a 401: the secrets differ), which Beast's error does not.
    if (e.code() != websocket::error::upgrade_declined) throw;
    throw std::runtime_error("the WebSocket upgrade was answered HTTP " +
                             std::to_string(answer.result_int()) + " (" + e.what() + ")");
  }
  // ComfyUI's one exchange on the socket: previews with their metadata, which name their
  // prompt, so that the gateway can relay them to its client.
  const std::string flags =
      R"({"type": "feature_flags", "data": {"supports_preview_metadata": true}})";
  co_await state->ws.async_write(asio::buffer(flags), use_awaitable);
  lowest.expires_never();  // a host may be silent while a node runs
  state->ws.read_message_max(max_event_bytes);
  // A handshake or read that had completed when close_events() was called still resumes here
  // with success: nothing is said of a stream the gateway has let go.
  if (state->closed_by_us) co_return;
  on_open();
  for (;;) {
    beast::flat_buffer buffer;
    co_await state->ws.async_read(buffer, use_awaitable);
    if (state->closed_by_us) co_return;
    on_message(beast::buffers_to_string(buffer.data()), !state->ws.got_text());
  }
}

host_link::host_link(asio::io_context& io, std::string address, std::uint16_t port,
                     std::optional<std::string> secret)
    : io_(io), address_(std::move(address)), port_(port), secret_(std::move(secret)) {}

host_link::~host_link() {
  close_events();
}

namespace {

// Why a request to `where` failed, from its coroutine's exception: a refused connection is
// host_not_listening (the request never left, and the host's process is gone: a stopped one
// still accepts connections), an answer past its cap answer_too_large, anything else
// host_unreachable.
error failure_of(std::exception_ptr e, const std::string& where) {
  std::string why = "failed";
  const char* code = gateway_errc::host_unreachable;
  try {
    std::rethrow_exception(e);
  } catch (const too_large& x) {
    why = x.what();
    code = gateway_errc::answer_too_large;
  } catch (const boost::system::system_error& x) {
    why = x.what();
    if (x.code() == asio::error::connection_refused) code = gateway_errc::host_not_listening;
  } catch (const std::exception& x) {
    why = x.what();
  } catch (...) {
  }
  return error{code, where + ": " + why};
}

}  // namespace

std::optional<boost::asio::ip::tcp::endpoint> host_link::endpoint() const {
  beast::error_code ec;
  const auto addr = asio::ip::make_address(address_, ec);
  if (ec) return std::nullopt;
  return tcp::endpoint(addr, port_);
}

void host_link::request(std::string method, std::string target, std::string body,
                        answer_handler done, std::chrono::milliseconds deadline,
                        std::size_t max_bytes, std::string content_type) {
  const auto at = endpoint();
  if (!at) {
    asio::post(io_, [done = std::move(done), a = address_] {
      done(error{gateway_errc::host_unreachable, "no IP address: " + a});
    });
    return;
  }
  const std::string where = "http://" + address_ + ":" + std::to_string(port_) + target;
  asio::co_spawn(io_,
                 exchange(*at, std::move(method), std::move(target), std::move(body), secret_,
                          deadline, max_bytes, std::move(content_type)),
                 [done = std::move(done), where](std::exception_ptr e, host_answer a) {
                   if (!e) return done(std::move(a));
                   done(failure_of(e, where));
                 });
}

void host_link::download(std::string target, int fd, std::uint64_t max_bytes, download_handler done,
                         std::chrono::milliseconds idle_deadline) {
  const auto at = endpoint();
  if (!at) {
    asio::post(io_, [done = std::move(done), a = address_] {
      done(error{gateway_errc::host_unreachable, "no IP address: " + a});
    });
    return;
  }
  const std::string where = "http://" + address_ + ":" + std::to_string(port_) + target;
  asio::co_spawn(io_,
                 fetch_to(*at, std::move(target), fd, max_bytes, secret_, idle_deadline),
                 [done = std::move(done), where](std::exception_ptr e, download_answer a) {
                   if (!e) return done(std::move(a));
                   done(failure_of(e, where));
                 });
}

void host_link::open_events(std::string client_id, std::function<void()> on_open,
                            std::function<void(std::string, bool)> on_message,
                            std::function<void(std::string)> on_closed) {
  close_events();
  auto state = std::make_shared<stream_state>(io_);
  stream_ = state;
  const auto endpoint_of_host = endpoint();
  if (!endpoint_of_host) {
    asio::post(io_, [on_closed, a = address_] { on_closed("no IP address: " + a); });
    return;
  }
  const tcp::endpoint at = *endpoint_of_host;
  const std::string host = address_ + ":" + std::to_string(port_);
  asio::co_spawn(io_,
                 read_events(state, at, host, secret_, std::move(client_id), std::move(on_open),
                             std::move(on_message)),
                 [state, on_closed = std::move(on_closed)](std::exception_ptr e) {
                   if (state->closed_by_us) return;
                   std::string why = "closed";
                   try {
                     if (e) std::rethrow_exception(e);
                   } catch (const std::exception& x) {
                     why = x.what();
                   } catch (...) {
                   }
                   on_closed(why);
                 });
}

void host_link::close_events() {
  if (!stream_) return;
  stream_->closed_by_us = true;
  beast::error_code ignored;
  beast::get_lowest_layer(stream_->ws).socket().close(ignored);
  stream_.reset();
}

result<host_answer> request_and_wait(host_link& link, std::string method, std::string target,
                                     std::string body) {
  auto promise = std::make_shared<std::promise<result<host_answer>>>();
  auto answer = promise->get_future();
  link.request(std::move(method), std::move(target), std::move(body),
               [promise](result<host_answer> a) { promise->set_value(std::move(a)); });
  return answer.get();
}

}  // namespace orch::gateway
