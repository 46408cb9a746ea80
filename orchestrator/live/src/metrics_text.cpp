#include "orch/live/metrics_text.hpp"

#include <cstdio>
#include <sstream>

#include "orch/support/json_fields.hpp"

namespace orch::live {
namespace {

using nlohmann::json;

std::string number(double v, const char* format = "%.17g") {
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

class exposition {
 public:
  void family(const std::string& name, const char* type, const char* help) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  void sample(const std::string& name, const std::string& labels, const std::string& value) {
    out_ << name;
    if (!labels.empty()) out_ << '{' << labels << '}';
    out_ << ' ' << value << '\n';
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

std::string label(const char* name, const std::string& value) {
  return std::string(name) + "=\"" + escape_label_value(value) + '"';
}

// One gauge or counter family over every process that has the field as a number.
void per_process(exposition& x, const json& processes, const std::string& name, const char* type,
                 const char* help, const char* key) {
  x.family(name, type, help);
  for (const auto& p : processes) {
    const auto it = p.find(key);
    if (it == p.end() || !it->is_number()) continue;
    x.sample(name, label("process", text_field(p, "process")), number(it->get<double>()));
  }
}

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string prometheus_metrics(const metrics_inputs& in) {
  exposition x;
  const json& processes = in.status.contains("processes") && in.status["processes"].is_array()
                              ? in.status["processes"]
                              : json::array();
  x.family("comfy_orch_process_info", "gauge",
           "One per process: its mode, memory manager, state and free-memory view");
  for (const auto& p : processes) {
    const json& view = p.contains("free_view") ? p["free_view"] : json();
    x.sample("comfy_orch_process_info",
             label("process", text_field(p, "process")) + "," +
                 label("mode", text_field(p, "mode")) + "," +
                 label("manager", text_field(p, "manager")) + "," +
                 label("state", text_field(p, "state")) + "," +
                 label("free_view", view.is_string() ? view.get<std::string>() : "none"),
             "1");
  }
  const struct {
    const char* name;
    const char* type;
    const char* help;
    const char* key;
  } families[] = {
      {"comfy_orch_pager_resident_bytes", "gauge", "Pager pages on the device",
       "pager_resident_bytes"},
      {"comfy_orch_ledger_loaded_bytes", "gauge", "Ledger model bytes on the device",
       "ledger_loaded_bytes"},
      {"comfy_orch_device_pinned_bytes", "gauge", "Pager pages pinned now", "device_pinned_bytes"},
      {"comfy_orch_pinned_reserved_bytes", "gauge", "Pinned host memory reserved from the budget",
       "pinned_reserved_bytes"},
      {"comfy_orch_pinned_grant_bytes", "gauge", "Pinned budget granted to the process",
       "pinned_grant_bytes"},
      {"comfy_orch_cast_buffer_bytes", "gauge", "Cast buffers now", "cast_buffer_bytes"},
      {"comfy_orch_cast_high_water_bytes", "gauge", "Cast buffers' high-water mark",
       "cast_high_water_bytes"},
      {"comfy_orch_cast_bound_bytes", "gauge", "Cast buffers' bound: streams x the largest cast",
       "cast_bound_bytes"},
      {"comfy_orch_device_total_bytes", "gauge", "The device as the process sees it",
       "device_total_bytes"},
      {"comfy_orch_device_free_bytes", "gauge", "Free device memory in the process's view",
       "device_free_bytes"},
      {"comfy_orch_epoch", "gauge", "The prompt epoch", "epoch"},
      {"comfy_orch_generation", "gauge", "The worker's generation", "generation"},
      {"comfy_orch_calls_total", "counter", "Node calls the process ran", "calls"},
      {"comfy_orch_restarts_total", "counter", "Times the worker was lost and replaced",
       "restarts"},
      {"comfy_orch_boundary_releases_total", "counter",
       "Node-boundary releases (pager) or epoch resets (ledger)", "boundary_releases"},
  };
  for (const auto& f : families) per_process(x, processes, f.name, f.type, f.help, f.key);

  std::map<std::string, std::uint64_t> diverging;
  for (const auto& p : processes)
    if (text_field(p, "mode") == "worker") diverging[text_field(p, "process")] = 0;
  if (in.divergences.contains("differences")) {
    for (const auto& d : in.divergences["differences"]) {
      if (d["severity"] == "divergence" && d["acknowledged"] == false)
        ++diverging[text_field(d, "process")];
    }
  }
  x.family("comfy_orch_divergences", "gauge",
           "Unacknowledged divergences of the worker from its host (comfy-orch diverge)");
  for (const auto& [process, n] : diverging)
    x.sample("comfy_orch_divergences", label("process", process), std::to_string(n));

  for (const auto& [name, counts, help] :
       {std::tuple{"comfy_orch_evictions_total", &in.evictions,
                   "Evictions the host asked of the worker, each with its receipt"},
        std::tuple{"comfy_orch_frees_total", &in.frees, "POST /free receipts from the worker"}}) {
    x.family(name, "counter", help);
    for (const auto& [process, n] : *counts)
      x.sample(name, label("process", process), std::to_string(n));
  }

  const std::string h = "comfy_orch_node_call_duration_seconds";
  x.family(h, "histogram", "Node call durations per env, from the request sent to its answer");
  for (const auto& [env, hist] : in.call_durations) {
    const std::string env_label = label("env", env);
    for (std::size_t i = 0; i < runtime::call_histogram::bounds.size(); ++i) {
      x.sample(h + "_bucket",
               env_label + "," + label("le", number(runtime::call_histogram::bounds[i], "%g")),
               std::to_string(hist.buckets[i]));
    }
    x.sample(h + "_bucket", env_label + ",le=\"+Inf\"", std::to_string(hist.count));
    x.sample(h + "_sum", env_label, number(hist.sum_seconds));
    x.sample(h + "_count", env_label, std::to_string(hist.count));
  }
  for (const char* key : {"budget_bytes", "physical_ram_bytes", "cgroup_limit_bytes"}) {
    const std::string name = std::string("comfy_orch_") + key;
    x.family(name, "gauge",
             key == std::string("budget_bytes")         ? "The one pinned budget"
             : key == std::string("physical_ram_bytes") ? "Physical RAM as the host reads it"
                                                        : "The host's cgroup RAM limit");
    if (in.status.contains(key) && in.status[key].is_number())
      x.sample(name, "", number(in.status[key].get<double>()));
  }
  return x.text();
}

}  // namespace orch::live
