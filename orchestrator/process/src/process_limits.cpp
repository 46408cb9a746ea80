#include "orch/process/process_limits.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <string>

#include "orch/process/errc.hpp"

namespace orch::process {

std::uint64_t descriptors_needed(std::size_t workers) noexcept {
  return 64 + 16 * static_cast<std::uint64_t>(workers);
}

status ensure_open_file_limit(std::uint64_t needed) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return ok_status();  // nothing to go by
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur >= needed) return ok_status();
  if (limit.rlim_cur == RLIM_INFINITY) return ok_status();
  if (limit.rlim_max == RLIM_INFINITY || limit.rlim_max >= needed) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max == RLIM_INFINITY
                          ? needed
                          : std::max<rlim_t>(needed, std::min<rlim_t>(limit.rlim_max, 65536));
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) return ok_status();
  }
  return error{process_errc::fd_limit,
               "the open-file limit is " + std::to_string(limit.rlim_cur) + " (hard limit " +
                   (limit.rlim_max == RLIM_INFINITY ? std::string("unlimited")
                                                    : std::to_string(limit.rlim_max)) +
                   "); this deployment needs about " + std::to_string(needed) +
                   ": raise it, e.g. ulimit -n " +
                   std::to_string(std::max<std::uint64_t>(needed, 4096))};
}

}  // namespace orch::process
