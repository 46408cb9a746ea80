#include "orch/control/control_socket.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <future>
#include <set>

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

#include "orch/control/errc.hpp"

namespace orch::control {

namespace asio = boost::asio;
using local = asio::local::stream_protocol;
using nlohmann::json;

namespace {

json error_line(const std::string& code, const std::string& message) {
  return {{"error", {{"code", code}, {"message", message}}}};
}

std::string line_of(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + '\n';
}

}  // namespace

long peer_uid(int fd) {
  ucred cred{};
  socklen_t size = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size) != 0) return -1;
  return static_cast<long>(cred.uid);
}

class control_session;

struct control_socket::state {
  state(asio::io_context& context, handler h, control_limits l)
      : io(context), acceptor(context), accept_pause(context), on_request(std::move(h)),
        limits(l) {}
  asio::io_context& io;
  local::acceptor acceptor;
  asio::steady_timer accept_pause;  // after a failed accept (out of fds): not a busy loop
  handler on_request;
  control_limits limits;
  std::set<std::shared_ptr<control_session>> sessions;  // io thread only
  bool stopped = false;                                 // io thread only
};

class control_session : public std::enable_shared_from_this<control_session> {
 public:
  control_session(std::shared_ptr<control_socket::state> server, local::socket socket)
      : server_(std::move(server)),
        socket_(std::move(socket)),
        buffer_(server_->limits.max_request + 1),
        idle_(server_->io) {}

  void start() {
    const long uid = peer_uid(socket_.native_handle());
    if (uid != server_->limits.allowed_uid) {
      // Past the directory's 0700 (root, or a directory opened up by hand): refused by name.
      send_and_close(error_line(control_errc::peer_refused,
                                "this server (uid " + std::to_string(server_->limits.allowed_uid) +
                                    ") answers only its own user; the peer is uid " +
                                    std::to_string(uid)));
      return;
    }
    read_next();
  }

  void close() {
    boost::system::error_code ec;
    idle_.cancel();
    socket_.close(ec);
  }

 private:
  void read_next() {
    arm_idle_timer();
    asio::async_read_until(socket_, buffer_, '\n',
                           [self = shared_from_this()](boost::system::error_code ec,
                                                       std::size_t n) { self->on_line(ec, n); });
  }

  void arm_idle_timer() {
    idle_.expires_after(server_->limits.idle_timeout);
    idle_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->finish();
    });
  }

  void on_line(boost::system::error_code ec, std::size_t n) {
    if (ec == asio::error::not_found) {  // the buffer filled without a newline
      send_and_close(error_line(
          control_errc::request_too_large,
          "a request line is at most " + std::to_string(server_->limits.max_request) + " bytes"));
      return;
    }
    if (ec) {
      finish();
      return;
    }
    std::string text(asio::buffers_begin(buffer_.data()),
                     asio::buffers_begin(buffer_.data()) + static_cast<std::ptrdiff_t>(n));
    buffer_.consume(n);
    const json request = json::parse(text, nullptr, false);
    json answer;
    if (!request.is_object()) {
      answer =
          error_line(control_errc::invalid_request, "a request is one JSON object on one line");
    } else {
      try {
        answer = server_->on_request(request);
      } catch (const std::exception& e) {
        answer = error_line(control_errc::internal_error, e.what());
      }
    }
    reply_ = line_of(answer);
    asio::async_write(socket_, asio::buffer(reply_),
                      [self = shared_from_this()](boost::system::error_code e, std::size_t) {
                        if (e) {
                          self->finish();
                        } else {
                          self->read_next();
                        }
                      });
  }

  void send_and_close(const json& answer) {
    reply_ = line_of(answer);
    asio::async_write(
        socket_, asio::buffer(reply_),
        [self = shared_from_this()](boost::system::error_code, std::size_t) { self->finish(); });
  }

  void finish() {
    close();
    server_->sessions.erase(shared_from_this());
  }

  std::shared_ptr<control_socket::state> server_;
  local::socket socket_;
  asio::streambuf buffer_;
  asio::steady_timer idle_;
  std::string reply_;
};

namespace {

void accept_next(const std::shared_ptr<control_socket::state>& s) {
  s->acceptor.async_accept([s](boost::system::error_code ec, local::socket socket) {
    if (s->stopped) return;
    if (!ec) {
      if (s->sessions.size() >= s->limits.max_connections) {
        boost::system::error_code ignored;
        socket.close(ignored);
      } else {
        auto session = std::make_shared<control_session>(s, std::move(socket));
        s->sessions.insert(session);
        session->start();
      }
    }
    if (ec == asio::error::operation_aborted) return;
    if (!ec) return accept_next(s);
    // EMFILE and the like leave the listener readable: accepting again at once would spin the
    // io thread that carries every worker's channel.
    s->accept_pause.expires_after(std::chrono::milliseconds(50));
    s->accept_pause.async_wait([s](boost::system::error_code e) {
      if (!e && !s->stopped) accept_next(s);
    });
  });
}

}  // namespace

control_socket::control_socket(asio::io_context& io, handler on_request, control_limits limits)
    : state_(std::make_shared<state>(io, std::move(on_request), limits)) {}

control_socket::~control_socket() {
  stop();
}

status control_socket::listen(const std::filesystem::path& path) {
  auto refused = [&](const std::string& why) {
    return error{control_errc::listen_failed, "control socket " + path.string() + ": " + why};
  };
  if (path.string().size() >= sizeof(sockaddr_un{}.sun_path)) {
    return refused("the path is longer than a Unix socket address takes (" +
                   std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) +
                   " bytes); set XDG_RUNTIME_DIR to a shorter directory");
  }
  ::unlink(path.c_str());  // a socket left by a server of this pid that was killed
  auto bound = std::make_shared<std::promise<boost::system::error_code>>();
  auto future = bound->get_future();
  asio::post(state_->io, [bound, path, s = state_] {
    boost::system::error_code ec;
    s->acceptor.open(local(), ec);
    if (!ec) s->acceptor.bind(local::endpoint(path.string()), ec);
    // Only this user may connect: the directory is 0700 already, and this is the second lock.
    if (!ec && ::chmod(path.c_str(), 0600) != 0) {
      ec = boost::system::error_code(errno, boost::system::system_category());
    }
    if (!ec) s->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) accept_next(s);
    bound->set_value(ec);
  });
  if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return refused("the host's io thread did not answer");
  }
  if (const auto ec = future.get()) return refused(ec.message());
  return ok_status();
}

void control_socket::stop() {
  if (stopped_) return;
  stopped_ = true;
  auto done = std::make_shared<std::promise<void>>();
  auto future = done->get_future();
  asio::post(state_->io, [done, s = state_] {
    if (!s->stopped) {
      s->stopped = true;
      boost::system::error_code ec;
      s->acceptor.close(ec);
      s->accept_pause.cancel();
      auto sessions = std::move(s->sessions);
      for (const auto& session : sessions) session->close();
    }
    done->set_value();
  });
  // The io thread runs until the host shuts down, after this; the wait is bounded all the same.
  future.wait_for(std::chrono::seconds(5));
}

}  // namespace orch::control
