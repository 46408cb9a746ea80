#include "orch/gateway/fleet_config.hpp"

#include <unistd.h>

#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "orch/manifests/toml_source.hpp"
#include "orch/manifests/units.hpp"

namespace orch::gateway {

namespace {

namespace fs = std::filesystem;

// One table of the file read strictly: each key once, of its type, unknown keys refused.
class table_reader {
 public:
  table_reader(const toml::table& t, std::string prefix, const std::string& file,
               manifests::diagnostics& diags, std::set<std::string> known)
      : t_(t), prefix_(std::move(prefix)), file_(file), diags_(diags) {
    for (const auto& [key, node] : t)
      if (!known.contains(std::string(key.str())))
        diags_.error(manifests::position_of(file_, node, &t_), key_of(key.str()), "unknown key",
                     "remove it, or spell one of: " + list(known));
  }

  std::optional<std::string> text(const char* key) {
    const toml::node* n = t_.get(key);
    if (n == nullptr) return std::nullopt;
    if (const auto* s = n->as_string(); s != nullptr && !s->get().empty()) return s->get();
    wrong(key, *n, "a non-empty string");
    return std::nullopt;
  }

  // An integer in [low, high].
  std::optional<std::int64_t> integer(const char* key, std::int64_t low, std::int64_t high) {
    const toml::node* n = t_.get(key);
    if (n == nullptr) return std::nullopt;
    if (const auto* i = n->as_integer(); i != nullptr && i->get() >= low && i->get() <= high)
      return i->get();
    wrong(key, *n, "an integer from " + std::to_string(low) + " to " + std::to_string(high));
    return std::nullopt;
  }

  void error(const char* key, std::string message, std::string fix) {
    const toml::node* n = t_.get(key);
    diags_.error(manifests::position_of(file_, n != nullptr ? *n : t_, &t_), key_of(key),
                 std::move(message), std::move(fix));
  }

  std::string key_of(std::string_view key) const { return manifests::join_key(prefix_, key); }

 private:
  void wrong(const char* key, const toml::node& n, const std::string& expected) {
    diags_.error(manifests::position_of(file_, n, &t_), key_of(key),
                 "expected " + expected + ", got " + manifests::describe(n),
                 "write " + key_of(key) + " as " + expected);
  }
  static std::string list(const std::set<std::string>& keys) {
    std::string out;
    for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
    return out;
  }

  const toml::table& t_;
  std::string prefix_;
  const std::string& file_;
  manifests::diagnostics& diags_;
};

fs::path relative_to(const fs::path& file, const std::string& path) {
  const fs::path p(path);
  return p.is_absolute() ? p : file.parent_path() / p;
}

}  // namespace

// A path of "/" at most: the gateway speaks plain HTTP to its hosts, over the fleet secret
// (docs/fleet.md).
bool parse_host_url(const std::string& url, static_host& out) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return false;
  std::string rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || rest.find('/') != std::string::npos) return false;
  const std::string port = rest.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return false;
  const long n = std::stol(port);
  if (n < 1 || n > 65535) return false;
  out.url = url;
  out.host = rest.substr(0, colon);
  out.port = static_cast<std::uint16_t>(n);
  return true;
}

namespace {

void read_gateway(const toml::table& t, const std::string& file, manifests::diagnostics& diags,
                  fleet_config& c) {
  table_reader r(t, "gateway", file, diags,
                 {"listen", "port", "secret_file", "history_size", "fingerprint", "placement",
                  "pressure_window_ms", "state_file", "user_directory", "input_directory",
                  "output_directory", "temp_directory", "max_output_file",
                  "max_outputs_per_prompt"});
  if (auto v = r.text("listen")) c.listen = *v;
  if (auto v = r.integer("port", 0, 65535)) c.port = static_cast<std::uint16_t>(*v);
  if (auto v = r.text("secret_file")) c.secret_file = relative_to(c.file, *v);
  if (auto v = r.text("state_file")) {
    if (v->back() == '/')
      r.error("state_file", "\"" + *v + "\" names a directory",
              "write the path of a file, e.g. state_file = \"gateway-state.sqlite\"");
    else
      c.state_file = relative_to(c.file, *v);
  }
  if (auto v = r.integer("history_size", 0, 1000000)) c.history_size = static_cast<std::size_t>(*v);
  if (auto v = r.text("user_directory")) c.user_directory = relative_to(c.file, *v);
  if (auto v = r.text("input_directory")) c.input_directory = relative_to(c.file, *v);
  if (auto v = r.text("output_directory")) c.output_directory = relative_to(c.file, *v);
  if (auto v = r.text("temp_directory")) c.temp_directory = relative_to(c.file, *v);
  if (auto v = r.text("max_output_file")) {
    const auto bytes = manifests::parse_size(*v);
    if (bytes && *bytes > 0)
      c.max_output_file_bytes = *bytes;
    else
      r.error("max_output_file", "\"" + *v + "\" is no size",
              "write a size such as \"4GiB\" or \"512MiB\": the most bytes one output file a host "
              "names may hold");
  }
  if (auto v = r.integer("max_outputs_per_prompt", 1, 1000000))
    c.max_outputs_per_prompt = static_cast<std::size_t>(*v);
  if (auto v = r.text("fingerprint")) {
    const bool hex = v->size() == 71 && v->rfind("sha256:", 0) == 0 &&
                     v->find_first_not_of("0123456789abcdef", 7) == std::string::npos;
    if (hex)
      c.fingerprint = *v;
    else
      r.error("fingerprint", "\"" + *v + "\" is no fingerprint",
              "write the \"sha256:...\" (64 lower-case hex digits) a host of the fleet reports "
              "at GET /orch/fleet/host, or leave it out to take the first host's");
  }
  if (auto v = r.text("placement")) {
    if (*v == "round_robin")
      c.round_robin = true;
    else if (*v != "resident")
      r.error("placement", "\"" + *v + "\" is no placement",
              "write \"resident\" (the default: prompts go where their models are) or "
              "\"round_robin\" (the baseline, for measuring)");
  }
  if (auto v = r.integer("pressure_window_ms", 0, 3600000))
    c.pressure_window_ms = static_cast<std::uint64_t>(*v);
}

void read_ray(const toml::table& t, const std::string& file, manifests::diagnostics& diags,
              fleet_config& c) {
  table_reader r(t, "ray", file, diags,
                 {"address", "python", "hosts", "resource", "gpus_per_host", "deployment",
                  "comfy_orch"});
  ray_hosts ray;
  const auto address = r.text("address");
  const auto python = r.text("python");
  const auto deployment = r.text("deployment");
  if (!address)
    r.error("address", "[ray] needs the cluster's address",
            "write address = \"HOST:6379\", the address `ray start --head` printed");
  if (!python)
    r.error("python", "[ray] needs the interpreter Ray is installed in",
            "write python = \".deps/ray/bin/python\" (the README's set-up makes it)");
  if (!deployment)
    r.error("deployment", "[ray] needs the deployment every host serves",
            "write deployment = \"deployment.toml\", the same file on every node");
  if (auto v = r.integer("hosts", 1, 4096)) ray.hosts = static_cast<unsigned>(*v);
  if (auto v = r.text("resource")) ray.resource = *v;
  if (auto v = r.integer("gpus_per_host", 0, 64)) ray.gpus_per_host = static_cast<unsigned>(*v);
  if (address) ray.address = *address;
  if (python) ray.python = relative_to(c.file, *python);
  if (deployment) ray.deployment = relative_to(c.file, *deployment);
  if (auto v = r.text("comfy_orch")) {
    ray.comfy_orch = *v;
  } else {
    // This executable: the nodes run the same build as the gateway unless told otherwise.
    std::error_code ec;
    ray.comfy_orch = fs::read_symlink("/proc/self/exe", ec);
  }
  c.ray = std::move(ray);
}

void read_hosts(const toml::array& hosts, const std::string& file, manifests::diagnostics& diags,
                fleet_config& c) {
  std::set<std::string> seen;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const std::string prefix = "host[" + std::to_string(i) + "]";
    const auto* t = hosts.get(i)->as_table();
    if (t == nullptr) {
      diags.error(manifests::position_of(file, *hosts.get(i), &hosts), prefix, "expected a table",
                  "write each host as [[host]] with url = \"http://HOST:PORT\"");
      continue;
    }
    table_reader r(*t, prefix, file, diags, {"url"});
    const auto url = r.text("url");
    static_host h;
    if (!url) {
      r.error("url", "a [[host]] needs its url",
              "write url = \"http://HOST:PORT\", where its `comfy-orch serve` listens");
    } else if (!parse_host_url(*url, h)) {
      r.error("url", "\"" + *url + "\" is no http://HOST:PORT address",
              "write url = \"http://HOST:PORT\" (plain HTTP, no path): the hosts speak HTTP over "
              "the fleet secret");
    } else if (!seen.insert(h.host + ":" + std::to_string(h.port)).second) {
      r.error("url", "\"" + *url + "\" is named twice", "list each host once");
    } else {
      c.hosts.push_back(std::move(h));
    }
  }
}

std::optional<fleet_config> read(const toml::table& root, const fs::path& file,
                                 manifests::diagnostics& diags) {
  const std::string name = file.string();
  const auto errors_before = diags.count(manifests::severity::error);
  fleet_config c;
  c.file = file;
  // Beside the fleet file, named after it: the same fleet file finds the same state again, and
  // two fleets in one directory do not share one.
  c.state_file = file.parent_path() / (file.stem().string() + ".gateway-state.sqlite");
  // A deployment's defaults: input/, output/, temp/ beside the file.
  const fs::path base = fs::absolute(file).parent_path();
  c.input_directory = base / "input";
  c.output_directory = base / "output";
  c.temp_directory = base / "temp";
  for (const auto& [key, node] : root) {
    const std::string k(key.str());
    if (k == "gateway" && node.is_table())
      read_gateway(*node.as_table(), name, diags, c);
    else if (k == "ray" && node.is_table())
      read_ray(*node.as_table(), name, diags, c);
    else if (k == "host" && node.is_array())
      read_hosts(*node.as_array(), name, diags, c);
    else if (k == "gateway" || k == "ray" || k == "host")
      diags.error(manifests::position_of(name, node, &root), k,
                  "expected " + std::string(k == "host" ? "[[host]] tables" : "a table") +
                      ", got " + manifests::describe(node),
                  k == "host" ? "write each host as [[host]] with url = \"http://HOST:PORT\""
                              : "write it as a [" + k + "] table");
    else
      diags.error(manifests::position_of(name, node, &root), k, "unknown table or key",
                  "a fleet file has [gateway], and [ray] or [[host]] entries");
  }
  const bool has_ray = root.contains("ray");
  const bool has_hosts = root.contains("host");
  if (has_ray && has_hosts)
    diags.error(manifests::position_of(name, *root.get("host"), &root), "host",
                "both [ray] and [[host]] name the fleet's hosts",
                "keep [ray] (Ray starts the hosts) or the [[host]] list (hosts already "
                "running), not both");
  else if (!has_ray && !has_hosts)
    diags.error({name, 1, 0}, "ray", "the file names no hosts",
                "add [ray] (Ray starts the hosts) or [[host]] entries with url = "
                "\"http://HOST:PORT\" (hosts already running)");
  // Hosts Ray starts listen where Ray's nodes are: they answer only the fleet's secret
  // (docs/security.md), which the operator sets; there is no default.
  if (has_ray && !has_hosts && !c.secret_file)
    diags.error(manifests::position_of(name, *root.get("ray"), &root), "gateway.secret_file",
                "a fleet Ray starts needs the fleet's secret",
                "write [gateway] secret_file = \"fleet.secret\", a file only the operator can read "
                "holding a long random secret (e.g. `openssl rand -hex 32`)");
  if (diags.count(manifests::severity::error) > errors_before) return std::nullopt;
  if (c.user_directory.empty()) c.user_directory = relative_to(c.file, "user");
  for (auto* dir : {&c.input_directory, &c.output_directory, &c.temp_directory, &c.user_directory})
    *dir = fs::absolute(*dir).lexically_normal();
  return c;
}

}  // namespace

std::optional<fleet_config> parse_fleet_config(const std::string& text,
                                               const fs::path& display_name,
                                               manifests::diagnostics& diags) {
  auto root = manifests::parse_toml_text(text, display_name.string(), diags);
  if (!root) return std::nullopt;
  return read(*root, display_name, diags);
}

std::optional<fleet_config> load_fleet_config(const fs::path& file, manifests::diagnostics& diags) {
  auto root = manifests::parse_toml_file(file, diags);
  if (!root) return std::nullopt;
  return read(*root, file, diags);
}

}  // namespace orch::gateway
