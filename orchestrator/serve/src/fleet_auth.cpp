// fleet_auth.hpp's secret, read from its file with the checks an operator's mistake needs, and
// judged against each request's Authorization header.
#include "orch/serve/fleet_auth.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "orch/ipc/unique_fd.hpp"
#include "orch/serve/errc.hpp"
#include "orch/support/ascii_lower.hpp"
#include "orch/support/untrusted_text.hpp"
#include "log_throttle.hpp"

namespace orch::serve {

namespace {

const char* const bearer_help = "Authorization: Bearer <the fleet's secret>";

error secret_file_error(const std::filesystem::path& file, const std::string& what,
                        const std::string& fix) {
  return error{serve_errc::invalid_config,
               "--fleet-secret-file " + file.string() + " " + what + "\n  fix: " + fix};
}

std::string make_one(const std::filesystem::path& file) {
  return "write the fleet's secret there, readable by this user alone: head -c 32 /dev/urandom "
         "| base64 > " + file.string() + " && chmod 600 " + file.string();
}

// Whether `token` is `secret`, in time that depends on the secret's length alone: every byte of
// it is compared, whatever the token, so a wrong byte's place cannot be timed.
bool same_secret(std::string_view token, const std::string& secret) {
  volatile unsigned char differ = token.size() == secret.size() ? 0 : 1;
  for (std::size_t i = 0; i < secret.size(); ++i)
    differ = differ | static_cast<unsigned char>(secret[i] ^ (i < token.size() ? token[i] : 0));
  return differ == 0;
}

const char* reason_text(fleet_refusal why) {
  switch (why) {
    case fleet_refusal::no_header:
      return "the request has no Authorization header";
    case fleet_refusal::several_headers:
      return "the request has more than one Authorization header";
    case fleet_refusal::other_scheme:
      return "its Authorization header is not of the Bearer scheme";
    case fleet_refusal::wrong_secret:
      return "its Bearer token is not the fleet's secret";
  }
  return "refused";
}

}  // namespace

result<fleet_secret> fleet_secret::read(const std::filesystem::path& file) {
  ipc::unique_fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid())
    return errno == ENOENT
               ? secret_file_error(file, "does not exist", make_one(file))
               : secret_file_error(file, std::string("cannot be read: ") + std::strerror(errno),
                                   "name a file this user can read");
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return secret_file_error(file, "is not a regular file", make_one(file));
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return secret_file_error(file,
                             std::string("is open to group or others (mode ") + mode +
                                 "): a fleet's secret must be readable by this user alone",
                             "chmod 600 " + file.string());
  }
  std::string secret(max_bytes + 2, '\0');
  std::size_t got = 0;
  while (got < secret.size()) {
    const ssize_t n = ::read(fd.get(), secret.data() + got, secret.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return secret_file_error(file, std::string("cannot be read: ") + std::strerror(errno),
                               "name a file this user can read");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  secret.resize(got);
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();  // as `echo` and editors end
  if (secret.empty()) return secret_file_error(file, "is empty", make_one(file));
  if (secret.size() > max_bytes)
    return secret_file_error(file, "holds more than " + std::to_string(max_bytes) + " bytes",
                             make_one(file));
  if (secret.size() < min_bytes)
    return secret_file_error(file,
                             "holds " + std::to_string(secret.size()) + " bytes; a fleet's secret "
                                 "has at least " + std::to_string(min_bytes),
                             make_one(file));
  for (const char c : secret)
    if (c <= ' ' || c > '~')
      return secret_file_error(file,
                               "holds a byte an HTTP header cannot carry (a space, a control "
                               "character or one past ASCII)",
                               make_one(file));
  return fleet_secret(std::move(secret));
}

std::optional<fleet_refusal> fleet_secret::judge(
    std::span<const std::string_view> authorization) const {
  if (authorization.empty()) return fleet_refusal::no_header;
  if (authorization.size() > 1) return fleet_refusal::several_headers;
  std::string_view value = authorization.front();
  const auto space = value.find(' ');
  if (ascii_lower(value.substr(0, space)) != "bearer") return fleet_refusal::other_scheme;
  std::string_view token =
      space == std::string_view::npos ? std::string_view() : value.substr(space);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  if (!same_secret(token, secret_)) return fleet_refusal::wrong_secret;
  return std::nullopt;
}

http_reply fleet_refusal_reply(fleet_refusal why, std::string_view peer, std::string_view method,
                               std::string_view path) {
  // One throttle per reason: a stranger knocking without a header does not hide a gateway whose
  // secret went stale.
  static log_throttle said[4];
  if (said[static_cast<int>(why)].due())
    spdlog::warn("serve: refused {} {} from {} with 401: {} (a fleet host answers only its "
                 "gateway; said at most once a minute per reason)",
                 printable(method.substr(0, 16)), printable(path.substr(0, 200)), peer,
                 reason_text(why));
  std::string message = std::string("this server is a comfy-orch fleet host and answers only its "
                                    "gateway: ") + reason_text(why);
  if (why != fleet_refusal::wrong_secret) message += std::string(" (") + bearer_help + ")";
  return {401,
          "application/json",
          nlohmann::json{{"error", message}}.dump(),
          {{"WWW-Authenticate", std::string("Bearer realm=\"") + fleet_secret::realm + "\""}},
          nullptr};
}

}  // namespace orch::serve
