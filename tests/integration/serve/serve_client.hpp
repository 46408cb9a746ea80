// serve_client: a live `comfy-orch serve` child process and a Boost.Beast client for it, for the
// serve tests (docs/serve.md). The server is started on a free port (--port 0) and its
// "listening on" line read from its stdout; stop() sends SIGTERM and returns the exit status.
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

extern char** environ;

namespace orch::testing {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = boost::asio::ip::tcp;

struct reply {
  unsigned status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // by lower-case name
  nlohmann::json json() const { return body.empty() ? nlohmann::json() : nlohmann::json::parse(body); }
  std::string header(const std::string& lower_name) const {
    const auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// One request to the server on `port` over a connection of its own: a body of `content_type`,
// chunked (no Content-Length) when asked, with `extra` header fields (an Origin, as a browser
// sends).
inline reply request(unsigned short port, http::verb method, const std::string& target,
                     std::string body = {}, const std::string& content_type = "application/json",
                     bool chunked = false,
                     const std::vector<std::pair<std::string, std::string>>& extra = {}) {
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  stream.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [name, value] : extra) req.set(name, value);
  if (!body.empty() || method == http::verb::post) {
    req.set(http::field::content_type, content_type);
    req.body() = std::move(body);
    req.prepare_payload();
    if (chunked) req.chunked(true);
  }
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::size_t{256} << 20);
  http::read(stream, buffer, parser);
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  reply r{static_cast<unsigned>(parser.get().result_int()), parser.get().body(), {}};
  for (const auto& f : parser.get()) {
    std::string name(f.name_string());
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = std::string(f.value());
  }
  return r;
}

class serve_process {
 public:
  // Starts `comfy-orch serve <deployment> --port 0 <extra...>`; port() is 0 if it did not come up.
  serve_process(const std::string& binary, const std::string& deployment,
                std::vector<std::string> extra = {})
      : serve_process(binary, "serve", deployment, std::move(extra)) {}
  // The same for another command that prints serve's 'listening on' line (`gateway`).
  serve_process(const std::string& binary, const std::string& command, const std::string& file,
                std::vector<std::string> extra) {
    std::vector<std::string> args = {binary, command, file, "--port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    if (::pipe(out) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    if (posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ) != 0) pid_ = 0;
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    out_ = ::fdopen(out[0], "r");
    char line[512];
    if (pid_ != 0 && out_ != nullptr && std::fgets(line, sizeof line, out_) != nullptr) {
      const std::string l(line);
      const auto colon = l.rfind(':');
      if (l.find("listening on http://") != std::string::npos && colon != std::string::npos)
        port_ = static_cast<unsigned short>(std::stoi(l.substr(colon + 1)));
    }
  }
  ~serve_process() {
    if (pid_ != 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
    if (out_ != nullptr) std::fclose(out_);
  }
  serve_process(const serve_process&) = delete;
  serve_process& operator=(const serve_process&) = delete;

  unsigned short port() const { return port_; }
  pid_t pid() const { return pid_; }
  // SIGTERM, then the exit code as a shell reports it (128 + N for signal N); -1 if it did not
  // exit within `limit`.
  int stop(std::chrono::seconds limit = std::chrono::seconds(30)) {
    ::kill(pid_, SIGTERM);
    const auto end = std::chrono::steady_clock::now() + limit;
    int st = 0;
    while (std::chrono::steady_clock::now() < end) {
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

  reply call(http::verb method, const std::string& target, const std::string& body = {}) const {
    return send(method, target, body, "application/json");
  }
  // A request with a body of `content_type` (request(), above).
  reply send(http::verb method, const std::string& target, std::string body,
             const std::string& content_type, bool chunked = false,
             const std::vector<std::pair<std::string, std::string>>& extra = {}) const {
    return request(port_, method, target, std::move(body), content_type, chunked, extra);
  }
  reply get(const std::string& target) const { return call(http::verb::get, target); }
  reply post(const std::string& target, const nlohmann::json& body) const {
    return call(http::verb::post, target, body.dump());
  }

 private:
  pid_t pid_ = 0;
  FILE* out_ = nullptr;
  unsigned short port_ = 0;
  bool exited_ = false;
};

// One kept-alive HTTP connection (as a browser or Node's fetch keeps one), reconnected when the
// server closed it.
class http_connection {
 public:
  explicit http_connection(unsigned short port) : port_(port), stream_(io_) {}
  reply post(const std::string& target, const nlohmann::json& body) {
    if (!open_) {
      stream_.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port_));
      beast::error_code ec;
      stream_.socket().set_option(tcp::no_delay(true), ec);
      open_ = true;
    }
    http::request<http::string_body> req{http::verb::post, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = body.dump();
    req.prepare_payload();
    http::write(stream_, req);
    http::response<http::string_body> res;
    http::read(stream_, buffer_, res);
    if (!res.keep_alive()) {
      beast::error_code ec;
      stream_.socket().close(ec);
      open_ = false;
    }
    return {static_cast<unsigned>(res.result_int()), res.body(), {}};
  }

 private:
  unsigned short port_;
  boost::asio::io_context io_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  bool open_ = false;
};

// One WebSocket client of /ws?clientId=<id> (or of `path`, /api/ws).
class ws_client {
 public:
  // `origin`: the Origin header a browser page would send (none when empty); `extra`: more
  // fields of the upgrade request (a fleet gateway's Authorization).
  ws_client(unsigned short port, const std::string& client_id, const std::string& origin = {},
            const std::string& path = "/ws",
            const std::vector<std::pair<std::string, std::string>>& extra = {})
      : ws_(io_) {
    auto& s = beast::get_lowest_layer(ws_);
    s.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    if (!origin.empty() || !extra.empty()) {
      ws_.set_option(
          websocket::stream_base::decorator([origin, extra](websocket::request_type& req) {
            if (!origin.empty()) req.set(http::field::origin, origin);
            for (const auto& [name, value] : extra) req.set(name, value);
          }));
    }
    ws_.handshake("127.0.0.1", path + "?clientId=" + client_id);
  }
  // Sends a text message, as a browser page does.
  void send(const nlohmann::json& message) {
    ws_.text(true);
    ws_.write(boost::asio::buffer(message.dump()));
  }
  // The next text message, or nullopt after `limit`.
  // A read that does not come in time closes the connection (a synchronous read has no timeout).
  std::optional<nlohmann::json> next(std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    if (!open_) return std::nullopt;
    beast::flat_buffer buffer;
    bool done = false;
    beast::error_code ec;
    ws_.async_read(buffer, [&](beast::error_code e, std::size_t) {
      ec = e;
      done = true;
    });
    io_.restart();
    io_.run_for(limit);
    if (!done) {
      open_ = false;
      beast::get_lowest_layer(ws_).close();
      io_.restart();
      io_.run();  // the read's handler, cancelled
      return std::nullopt;
    }
    if (ec) {
      open_ = false;
      return std::nullopt;
    }
    return nlohmann::json::parse(beast::buffers_to_string(buffer.data()));
  }
  // Messages up to and including the executing for no node of `prompt_id`.
  std::vector<nlohmann::json> until_prompt_end(const std::string& prompt_id) {
    std::vector<nlohmann::json> seen;
    while (auto m = next()) {
      seen.push_back(*m);
      if ((*m)["type"] == "executing" && (*m)["data"]["node"].is_null() &&
          (*m)["data"]["prompt_id"] == prompt_id)
        break;
    }
    return seen;
  }

 private:
  boost::asio::io_context io_;
  websocket::stream<beast::tcp_stream> ws_;
  bool open_ = true;
};

}  // namespace orch::testing
