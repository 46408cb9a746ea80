#include "live_http.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "orch/control/errc.hpp"
#include "orch/executor/prompt.hpp"
#include "orch/gateway/fleet_config.hpp"
#include "orch/serve/fleet_auth.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::cli {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using control::control_errc::bad_response;
using control::control_errc::connect_failed;

// Connect, write and read together. A gateway waits 5 s at most for its hosts.
constexpr auto deadline = std::chrono::seconds(30);
// The largest answer: a gateway's document holds every host's (64 MiB at most).
constexpr std::size_t max_answer_bytes = std::size_t{80} << 20;

std::string excerpt(const std::string& body) {
  return printable(body.substr(0, 300)) + (body.size() > 300 ? "..." : "");
}

}  // namespace

result<live_server_url> parse_live_url(const std::string& url) {
  gateway::static_host h;
  if (!gateway::parse_host_url(url, h))
    return error{control::control_errc::invalid_request,
                 "--url " + printable(url) +
                     " is not http://HOST:PORT: give the address a `comfy-orch serve` or "
                     "`comfy-orch gateway` listens on, as its 'listening on' line says"};
  return live_server_url{h.url, h.host, h.port};
}

result<std::string> read_live_secret(const std::string& file) {
  auto secret = serve::fleet_secret::read(file);
  if (!secret) return secret.err();
  return secret->value();
}

result<nlohmann::json> get_live_document(const live_server_url& server, const std::string& path,
                                         const std::optional<std::string>& secret) {
  std::string where = server.url;
  if (!where.empty() && where.back() == '/') where.pop_back();
  where += path;
  try {
    asio::io_context io;
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(deadline);
    const auto addresses = resolver.resolve(server.host, std::to_string(server.port));
    stream.connect(addresses);
    http::request<http::empty_body> req{http::verb::get, path, 11};
    req.set(http::field::host, server.host + ":" + std::to_string(server.port));
    req.set(http::field::accept, "application/json");
    if (secret) req.set(http::field::authorization, "Bearer " + *secret);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(max_answer_bytes);
    // The length checked after the header, as host_link does: Boost 1.74's response parser can
    // lose its body_limit error.
    http::read_header(stream, buffer, parser);
    if (const auto length = parser.content_length(); length && *length > max_answer_bytes)
      throw boost::system::system_error(http::error::body_limit);
    http::read(stream, buffer, parser);
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    const unsigned status = parser.get().result_int();
    const std::string& body = parser.get().body();
    if (status == 401)
      return error{bad_response,
                   where +
                       " answered HTTP 401: it is a fleet host that answers only its "
                       "gateway; pass its --fleet-secret-file, or ask the gateway instead"};
    if (status == 404)
      return error{bad_response, where +
                                     " answered HTTP 404: it is no comfy-orch serve or "
                                     "gateway (ComfyUI itself has no live views)"};
    if (status != 200)
      return error{bad_response,
                   where + " answered HTTP " + std::to_string(status) + ": " + excerpt(body)};
    auto doc = executor::parse_bounded_json(body);
    if (!doc || !doc->is_object())
      return error{bad_response, where + " answered with no JSON object" +
                                     (doc ? std::string() : ": " + doc.err().message)};
    return std::move(*doc);
  } catch (const boost::system::system_error& e) {
    if (e.code() == http::error::body_limit)
      return error{bad_response, where + " answered more than " +
                                     std::to_string(max_answer_bytes >> 20) + " MiB"};
    const bool timeout = e.code() == beast::error::timeout;
    return error{connect_failed,
                 "cannot read " + where + ": " +
                     (timeout ? "no answer within " + std::to_string(deadline.count()) + " s"
                              : e.code().message()) +
                     "; is a `comfy-orch serve` or `comfy-orch gateway` listening there? Check "
                     "--url against its 'listening on' line"};
  }
}

}  // namespace orch::cli
