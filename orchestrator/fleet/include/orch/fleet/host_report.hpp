// host_report: what a `comfy-orch serve` host says of itself at GET /orch/fleet/host, for the
// gateway that fills its host_view from it (issue 58; docs/fleet.md, "What a host reports"). The
// host writes it with host_report_json and the gateway reads it with parse_host_report, so the
// two cannot disagree on a field.
//
// The gateway reads it from another machine: it is untrusted. Every field is checked for its
// type and size, and a report that is wrong anywhere is refused whole, with the field named;
// no input makes the parser throw or crash (nesting is bounded before nlohmann-json parses).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "orch/fleet/placement.hpp"

namespace orch::fleet {

// The parts of a fingerprint by name ("comfy-orch", "deployment", "env:<name>"), each the
// version or the "sha256:<hex>" of what it covers.
using fingerprint_parts = std::map<std::string, std::string>;

struct host_report {
  host_view view;  // up and last_used are the gateway's: not in the report
  fingerprint_parts parts;
};

struct report_limits {
  std::size_t max_bytes = std::size_t{64} << 20;  // the report's text
  std::size_t max_names = 100'000;    // node classes, resident models, fingerprint parts: each
  std::size_t max_name_bytes = 1024;  // each name, part name or part value
  std::size_t max_depth = 8;          // the report nests 2 deep; more is not a report
};

struct host_report_reading {
  std::optional<host_report> report;  // view.up is set: the host answered
  std::string error;                  // when report is empty: the field, and what is wrong
};

// The report's JSON: {"name", "fingerprint", "fingerprint_parts", "node_classes" (sorted),
// "resident_models" (sorted), "free_device_bytes", "running", "queued"}.
nlohmann::json host_report_json(const host_report& report);

// Reads a report's text. Fields the report does not know are ignored (a newer host may say
// more); each known one must be there and right: name (non-empty), fingerprint
// ("sha256:" and 64 lower-case hex digits), fingerprint_parts (an object of strings),
// node_classes and resident_models (arrays of non-empty strings), free_device_bytes and queued
// (unsigned integers), running (a boolean).
host_report_reading parse_host_report(std::string_view text, const report_limits& limits = {});

// Why a host's fingerprint is not the fleet's, as one sentence naming each part that differs,
// then those that are the same, e.g. "env imageops-nodes: sha256:ab12cd34… here, sha256:cd34ef56…
// in the fleet; deployment: same". "here" is the host's value. Values are shortened and made
// printable: they came from another machine.
std::string fingerprint_difference(const fingerprint_parts& fleet, const fingerprint_parts& host);

}  // namespace orch::fleet
