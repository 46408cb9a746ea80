#include "orch/live/divergence_check.hpp"

#include <optional>
#include <set>
#include <string>

#include "orch/support/json_fields.hpp"

namespace orch::live {
namespace {

using nlohmann::json;

// A byte count: a non-negative integer, whichever way the JSON holds it.
std::optional<std::uint64_t> bytes_of(const json& j) {
  if (j.is_number_unsigned()) return j.get<std::uint64_t>();
  if (j.is_number_integer() && j.get<std::int64_t>() >= 0) return j.get<std::uint64_t>();
  return std::nullopt;
}

std::string mib(const json& bytes) {
  const auto b = bytes_of(bytes);
  return b ? std::to_string(*b >> 20) + " MiB" : std::string("unknown");
}

// A value for a sentence: strings as they are, null as "nothing", anything else as JSON.
std::string text_of(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  return j.is_null() ? "nothing" : j.dump(-1, ' ', false, json::error_handler_t::replace);
}

constexpr auto& field = field_or_null;

class checker {
 public:
  checker(const json& host, const json& worker, json& out)
      : host_(host),
        worker_(worker),
        out_(out),
        env_(text_of(field(worker, "process"))),
        acknowledged_(field(worker, "divergence_acknowledged") == true) {}

  void add(const char* kind, const std::string& name, const json& host, const json& worker,
           const char* severity, const std::string& explanation, const std::string& fix) {
    out_.push_back({{"process", env_},
                    {"kind", kind},
                    {"field", name},
                    {"host", host},
                    {"worker", worker},
                    {"severity", severity},
                    {"explanation", explanation},
                    {"fix", fix},
                    {"acknowledged", acknowledged_}});
  }

  void manager() {
    const json& h = field(host_, "manager");
    const json& w = field(worker_, "manager");
    if (h == w) return;
    add("manager", "manager", h, w, "divergence",
        "the host runs the " + text_of(h) + " memory manager (" +
            text_of(field(host_, "manager_reason")) + ") but this worker runs " + text_of(w) +
            " (its reason: " + text_of(field(worker_, "manager_reason")) +
            "): its weights are managed by other rules than the host's, so the host's "
            "free-memory decisions do not hold for it",
        "give the pack a pager plugin at the host's level (the plugin search path, "
        "ORCH_PLUGIN_PATH), or set ORCH_DIVERGENCE_ACK=1 in the pack's [env_vars] if this is "
        "intended");
  }

  void level() {
    const json& h = field(host_, "level");
    const json& w = field(worker_, "level");
    if (field(worker_, "manager") != "pager" || h == w) return;
    add("plugin", "level", h, w, "divergence",
        "this worker's pager speaks protocol level " + w.dump() + ", the host's " + h.dump() +
            ": the behaviours above level " + w.dump() + " are not mirrored in it",
        "install a pager plugin that speaks level " + h.dump() + " for this pack");
  }

  void plugins() {
    // A worker on another manager reports that manager's plugin in the slot: said once, above.
    if (field(host_, "manager") != field(worker_, "manager")) return;
    const json& hp = field(host_, "plugins");
    const json& wp = field(worker_, "plugins");
    if (!hp.is_array() || !wp.is_array()) return;
    for (const auto& h : hp) {
      for (const auto& w : wp) {
        if (field(h, "slot") != field(w, "slot")) continue;
        const std::string slot = text_of(field(h, "slot"));
        if (field(h, "name") != field(w, "name")) {
          add("plugin", slot + ".name", field(h, "name"), field(w, "name"), "divergence",
              "the host's " + slot + " plugin is not the one this worker loaded",
              "give the pack the host's " + slot +
                  " plugin, or acknowledge with "
                  "ORCH_DIVERGENCE_ACK=1");
        } else if (field(h, "version") != field(w, "version")) {
          add("plugin", slot + ".version", field(h, "version"), field(w, "version"), "note",
              "the same " + slot + " plugin in another version: its behaviour may differ",
              "install the host's version of the plugin for this pack");
        }
      }
    }
  }

  void dropped_settings() {
    const json& dropped = field(worker_, "dropped_settings");
    if (!dropped.is_array()) return;
    for (const auto& d : dropped) {
      add("dropped_setting", text_of(field(d, "name")), field(d, "value"), nullptr, "divergence",
          "the adapter dropped this setting: it needs protocol level " +
              field(d, "needs_level").dump() + " and this worker's plugin speaks " +
              field(worker_, "level").dump(),
          "install a plugin that speaks level " + field(d, "needs_level").dump() +
              " for this pack, or remove the setting");
    }
  }

  void settings() {
    const json& expected = field(worker_, "expected_settings");
    const json& applied = field(worker_, "applied_settings");
    bool any = false;
    std::set<std::string> names;
    // A worker that said nothing of its fields is held to its hash alone.
    if (expected.is_object() && applied.is_object() && !applied.empty()) {
      for (const auto& [k, v] : expected.items()) names.insert(k);
      for (const auto& [k, v] : applied.items()) names.insert(k);
    }
    for (const auto& name : names) {
      const json& e = field(expected, name.c_str());
      const json& a = field(applied, name.c_str());
      if (e == a) continue;
      any = true;
      add("setting", name, e, a, "divergence",
          "the host sent " + name + "=" + text_of(e) + " but the worker's plugins applied " +
              text_of(a),
          "the worker's plugin changed or ignored the setting: update the plugin, or check the "
          "pack's [memory] overrides");
    }
    if (!any && field(worker_, "settings_match") == false) {
      add("setting", "settings_hash", "host's", "other", "divergence",
          "the worker's applied-settings hash is not the host's, and its fields do not show "
          "why (they read the same, or it did not report them): a worker built from other "
          "sources",
          "rebuild the worker binary with the host's (comfy-orch --version on both)");
    }
  }

  void free_view() {
    const json& h = field(host_, "free_view");
    const json& w = field(worker_, "free_view");
    if (h.is_null() || w.is_null() || h == w) return;
    add("free_view", "free_view", h, w, "divergence",
        "the host reads free device memory as the " + text_of(h) + " view and this worker as the " +
            text_of(w) + " view: one of them sees memory the others use as free",
        "run the worker's device with the host's view (the same driver mode, or the sim "
        "backend's mode)");
  }

  void budget(const json& status) {
    const json& view = field(worker_, "memory_view");
    if (!view.is_object()) return;
    const json& budget = field(status, "budget_bytes");
    const json& seen = field(view, "budget_bytes");
    if (seen.is_number() && budget.is_number() && seen != budget) {
      add("budget", "budget_bytes", budget, seen, "divergence",
          "this worker draws on a pinned budget of " + mib(seen) +
              ", not the host's one budget of " + mib(budget),
          "restart the worker (it reads the budget from the host's control segment)");
    }
    const json& hc = field(field(host_, "memory_view"), "cgroup_limit_bytes");
    const json& wc = field(view, "cgroup_limit_bytes");
    if (hc != wc) {
      add("cgroup", "cgroup_limit_bytes", hc, wc, "divergence",
          "this worker runs under another cgroup RAM limit (" + mib(wc) + ") than the host (" +
              mib(hc) + "), but its share of the pinned budget was computed from the host's view",
          "run the workers in the host's cgroup, or set a pinned budget that fits the smaller "
          "limit");
    }
    const json& own = field(view, "own_budget_bytes");
    if (own.is_number() && budget.is_number() && own != budget) {
      add("budget", "own_budget_bytes", budget, own, "note",
          "on its own this worker would budget " + mib(own) +
              " from the RAM it sees; it uses the host's one budget instead",
          "nothing to do: the one budget is what keeps the processes' sum within RAM");
    }
  }

  void cast_bound() {
    const json& bound = field(worker_, "cast_bound_bytes");
    const json& high = field(worker_, "cast_high_water_bytes");
    if (!bytes_of(bound) || !bytes_of(high) || *bytes_of(high) <= *bytes_of(bound)) return;
    add("cast_bound", "cast_high_water_bytes", bound, high, "divergence",
        "cast buffers reached " + mib(high) + ", above their bound of " + mib(bound) +
            " (streams x the largest cast): buffers are kept past their replacement (the ratchet)",
        "use an allocator plugin that reuses cast buffers in place, or POST /free to release "
        "them");
  }

  void models() {
    const json& models = field(worker_, "models");
    if (!models.is_array()) return;
    for (const auto& m : models) {
      const std::string key = text_of(field(m, "key"));
      if (field(m, "stand_in") != true) {
        add("model", key, nullptr, field(m, "resident_bytes"), "divergence",
            "the host holds no stand-in for this model: it cannot see or evict its VRAM",
            "the worker's models report did not reach the host: restart the worker");
      } else if (field(m, "stand_in_resident_bytes") != field(m, "resident_bytes")) {
        add("model", key, field(m, "stand_in_resident_bytes"), field(m, "resident_bytes"),
            "divergence",
            "the host's stand-in counts " + mib(field(m, "stand_in_resident_bytes")) +
                " resident, the worker " + mib(field(m, "resident_bytes")),
            "a receipt was lost or is late: run a node on the worker, or POST /free");
      }
    }
  }

 private:
  const json& host_;
  const json& worker_;
  json& out_;
  std::string env_;
  bool acknowledged_;
};

}  // namespace

json find_divergences(const json& status) {
  json differences = json::array();
  const json& processes = field(status, "processes");
  json host;
  if (processes.is_array()) {
    for (const auto& p : processes)
      if (field(p, "mode") == "host") host = p;
  }
  if (processes.is_array() && !host.is_null()) {
    for (const auto& p : processes) {
      if (field(p, "mode") != "worker" || field(p, "state") != "ready") continue;
      checker c(host, p, differences);
      c.manager();
      c.level();
      c.plugins();
      c.dropped_settings();
      c.settings();
      c.free_view();
      c.budget(status);
      c.cast_bound();
      c.models();
    }
  }
  bool divergent = false;
  for (const auto& d : differences)
    if (d["severity"] == "divergence" && d["acknowledged"] == false) divergent = true;
  return {{"divergent", divergent}, {"differences", std::move(differences)}};
}

}  // namespace orch::live
