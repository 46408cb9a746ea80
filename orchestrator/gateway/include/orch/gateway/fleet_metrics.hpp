// fleet_metrics: every host's GET /metrics as one Prometheus text exposition (version 0.0.4) at
// the gateway (docs/fleet.md, "Live views across the fleet"). Each host's samples gain a first
// label host="host-N"; the samples of one family, from every host, are written together under
// one HELP and one TYPE (the format allows each once per family, and a family's lines together).
// A host's text is untrusted: it is read line by line, each sample checked against the format
// (metric and label names, quoted and escaped label values, a number, an optional timestamp) and
// written anew from what was read, never copied; a line that is not a sample, a comment, HELP or
// TYPE is dropped and counted, as is a sample that names its own `host` label, a TYPE after its
// family's first sample, a sample of a family whose TYPE another host declared otherwise, and
// one of the gateway's own families (comfy_orch_gateway_*). Label values have their control
// characters escaped (printable()), HELP text with one is dropped. Caps: lines of 64 KiB, 64 labels
// a sample, 200,000 samples and 10,000 families a host; past a cap the rest of that host's text is
// dropped.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace orch::gateway {

struct host_metrics {
  std::string host;  // its name at the gateway, host-N
  std::string text;  // its GET /metrics answer
};

struct merged_metrics {
  std::string text;                                  // the exposition, families in first-seen order
  std::map<std::string, std::size_t> dropped_lines;  // by host: lines not taken
};

inline constexpr const char* gateway_metric_prefix = "comfy_orch_gateway_";

merged_metrics merge_host_metrics(const std::vector<host_metrics>& hosts);

}  // namespace orch::gateway
