// Fuzzes parse_prompt with the bytes of a prompt file, then what the host does with what it
// parsed: validation against a small catalogue, the execution order, and encoding the answer as
// JSON text (--json prints it; a parse error quoting raw bytes once could not be). Nothing may
// throw, recurse without bound (a value nested 100,000 deep, a 100,000-node chain) or loop.
#include <cstddef>
#include <cstdint>
#include <string>

#include "orch/executor/prompt.hpp"
#include "orch/executor/prompt_validation.hpp"

namespace {

using orch::runtime::node_catalogue;

const node_catalogue& catalogue() {
  static const node_catalogue c = [] {
    node_catalogue out;
    (void)out.add({"A",
                   "A",
                   "t",
                   {{"x", "INT", true, 1, 0, 10, {}}, {"in", "*", false, {}, {}, {}, {}}},
                   {"IMAGE"},
                   false,
                   false,
                   "env", {}});
    (void)out.add({"B",
                   "B",
                   "t",
                   {{"image", "IMAGE", false, {}, {}, {}, {}},
                    {"mode", "COMBO", false, "a", {}, {}, {"a", "b"}},
                    {"on", "BOOLEAN", false, {}, {}, {}, {}}},
                   {"IMAGE"},
                   true,
                   false,
                   "env", {}});
    return out;
  }();
  return c;
}

void must_dump(const nlohmann::json& j) {
  try {
    (void)j.dump();  // the strict handler, as the --json lines use
  } catch (const nlohmann::json::exception&) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace orch::executor;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto p = parse_prompt(text);
  if (!p) {
    if (p.err().code != "invalid_prompt") __builtin_trap();
    must_dump(invalid_prompt_report(p.err()).to_json());
    return 0;
  }
  for (const auto& [id, node] : p->nodes) {
    for (const auto& [name, value] : node.inputs) {
      if (const auto* literal = std::get_if<nlohmann::json>(&value)) must_dump(*literal);
    }
  }
  const auto report = validate_prompt(*p, catalogue());
  must_dump(report.to_json());
  const auto order = execution_order(*p, report.outputs);
  if (order.size() > p->nodes.size()) __builtin_trap();
  return 0;
}
