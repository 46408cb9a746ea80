#include "orch/serve/serve_config.hpp"

#include <string>

#include "orch/serve/byte_budget.hpp"
#include "orch/serve/errc.hpp"

namespace orch::serve {

status check(const serve_config& config) {
  const struct {
    std::size_t largest, budget;
    const char *largest_flag, *budget_flag;
  } pairs[] = {{config.max_upload, config.http.max_spooled_in_flight, "--max-upload",
                "--max-uploads-in-flight"},
               {config.http.max_body, config.http.max_bodies_in_flight, "--max-body",
                "--max-bodies-in-flight"}};
  for (const auto& p : pairs) {
    if (byte_budget::due(p.largest) <= p.budget / 2) continue;
    return error{serve_errc::invalid_config,
                 std::string(p.largest_flag) + " (" + std::to_string(p.largest) +
                     " bytes) is larger than one client's share of " + p.budget_flag + " (" +
                     std::to_string(p.budget) +
                     " / 2, past each body's first 64 KiB): no body "
                     "that large could ever be received\n  fix: raise " +
                     p.budget_flag + " to at least twice " + p.largest_flag};
  }
  return ok_status();
}

}  // namespace orch::serve
