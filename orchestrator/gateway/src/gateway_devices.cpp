// The fleet's devices at the gateway (docs/fleet.md, "The frontend at the gateway"): POST /free
// forwarded to every host, and GET /system_stats in ComfyUI's shape with every host's devices.
// Both ask every host that is up and the fleet's at once, from http_server's waiting thread, and
// wait for the answers (each request has host_link's deadline), so neither the io nor the API
// thread waits on a host.
#include <sys/utsname.h>

#include <future>
#include <memory>

#include "orch/executor/prompt.hpp"
#include "orch/gateway/gateway_api.hpp"
#include "orch/ipc/cgroup_probe.hpp"
#include "orch/serve/json_reply.hpp"
#include "orch/serve/serve_request_fields.hpp"

namespace orch::gateway {

using nlohmann::json;
using serve::http_reply;
using serve::http_request;
using serve::json_reply;

namespace {

// What the gateway takes of a host's /system_stats: at most this many devices a host, each
// with ComfyUI's keys only, its name at most this long.
constexpr std::size_t max_devices_per_host = 64;
constexpr std::size_t max_device_name = 256;
constexpr auto stats_deadline = std::chrono::seconds(10);

std::uint64_t meminfo_bytes(const std::string& key) {
  const auto bytes = ipc::read_meminfo("/", key);
  return bytes ? *bytes : 0;
}

// A host's answer as JSON, or why there is none.
json answer_or_error(const result<host_answer>& a, const std::string& what) {
  if (!a) return {{"error", a.err().message}};
  if (a->status != 200)
    return {{"error", what + " answered HTTP " + std::to_string(a->status)}};
  auto body = executor::parse_bounded_json(a->body);
  if (!body || !body->is_object()) return {{"error", what + " answered no JSON object"}};
  return std::move(*body);
}

// One of a host's devices in ComfyUI's shape, its name prefixed with the host's ("host-1:
// cuda:0 NVIDIA H100") and the host in `orch_host`; nullopt for one that is not in that shape.
std::optional<json> device_of(const std::string& host, const json& d) {
  if (!d.is_object()) return std::nullopt;
  const auto name = d.find("name");
  if (name == d.end() || !name->is_string() ||
      name->get_ref<const std::string&>().size() > max_device_name)
    return std::nullopt;
  json out = {{"name", host + ": " + name->get<std::string>()}, {"orch_host", host}};
  if (auto type = d.find("type"); type != d.end() && type->is_string() &&
                                  type->get_ref<const std::string&>().size() <= max_device_name)
    out["type"] = *type;
  for (const char* key :
       {"index", "vram_total", "vram_free", "torch_vram_total", "torch_vram_free"})
    if (auto v = d.find(key); v != d.end() && v->is_number()) out[key] = *v;
  return out;
}

}  // namespace

std::vector<std::pair<std::string, result<host_answer>>> gateway_api::ask_every_host(
    const std::string& method, const std::string& target, const std::string& body) {
  const auto hosts = answering_hosts();
  // Each through a link of its own (the hosts' may be replaced meanwhile), all at once.
  std::vector<std::unique_ptr<host_link>> links;
  std::vector<std::future<result<host_answer>>> answers;
  for (const auto& [name, where] : hosts) {
    links.push_back(std::make_unique<host_link>(io_, where.first, where.second, options_.secret));
    auto promise = std::make_shared<std::promise<result<host_answer>>>();
    answers.push_back(promise->get_future());
    links.back()->request(
        method, target, body,
        [promise](result<host_answer> a) { promise->set_value(std::move(a)); }, stats_deadline);
  }
  std::vector<std::pair<std::string, result<host_answer>>> out;
  for (std::size_t i = 0; i < hosts.size(); ++i) out.emplace_back(hosts[i].first, answers[i].get());
  return out;
}

http_reply gateway_api::free(const http_request& req) {
  auto body = executor::parse_bounded_json(req.body.empty() ? std::string("{}") : req.body);
  if (!body || !body->is_object())
    return json_reply({{"error", "the body must be a JSON object"}}, 400);
  // ComfyUI's two flags, and nothing else a client sent, go to every host.
  const json forwarded = {{"unload_models", serve::flag(*body, "unload_models")},
                          {"free_memory", serve::flag(*body, "free_memory")}};
  http_reply later;
  later.later = [this, forwarded]() -> http_reply {
    // What ComfyUI does not answer, comfy-orch adds: each host's answer (its workers' receipts).
    json hosts = json::object();
    for (auto& [name, a] : ask_every_host("POST", "/free", forwarded.dump()))
      hosts[name] = answer_or_error(a, "POST /free");
    return json_reply({{"orch_hosts", hosts}});
  };
  return later;
}

http_reply gateway_api::system_stats() {
  http_reply later;
  later.later = [this]() -> http_reply {
    utsname u{};
    ::uname(&u);
    json devices = json::array();
    json hosts = json::object();
    json first_system;  // the versions a host runs, which the gateway does not
    for (auto& [name, a] : ask_every_host("GET", "/system_stats", {})) {
      const json stats = answer_or_error(a, "GET /system_stats");
      if (stats.contains("error")) {
        hosts[name] = stats;
        continue;
      }
      std::size_t taken = 0;
      if (auto d = stats.find("devices"); d != stats.end() && d->is_array())
        for (const auto& device : *d)
          if (taken < max_devices_per_host)
            if (auto one = device_of(name, device)) {
              devices.push_back(std::move(*one));
              ++taken;
            }
      hosts[name] = {{"devices", taken}};
      if (first_system.is_null())
        if (auto s = stats.find("system"); s != stats.end() && s->is_object()) first_system = *s;
    }
    const auto version = [&](const char* key) {
      if (first_system.is_object())
        if (auto v = first_system.find(key); v != first_system.end() && v->is_string() &&
                                             v->get_ref<const std::string&>().size() <= 256)
          return v->get<std::string>();
      return std::string();
    };
    const json stats = {{"system",
                         {{"os", "linux"},
                          {"ram_total", meminfo_bytes("MemTotal")},
                          {"ram_free", meminfo_bytes("MemAvailable")},
                          {"comfyui_version", version("comfyui_version")},
                          {"required_frontend_version", ""},
                          {"python_version", version("python_version")},
                          {"pytorch_version", version("pytorch_version")},
                          {"embedded_python", false},
                          {"argv", json::array({"comfy-orch", "gateway"})},
                          {"kernel", std::string(u.release)}}},
                        {"devices", devices},
                        {"orch_hosts", hosts}};
    return {200, "application/json", stats.dump(-1, ' ', false, json::error_handler_t::replace)};
  };
  return later;
}

}  // namespace orch::gateway
