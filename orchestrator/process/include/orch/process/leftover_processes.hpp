// leftover_processes: what a worker started that outlived it (docs/security.md, "Stopping"). A
// node may start a helper that detaches itself (setsid and a double fork): it leaves the
// worker's process group, so killing the group does not reach it, and it outlived the server.
// Every worker is started with ORCH_WORKER_INSTANCE=<host instance>/<env>/<generation> in its
// environment, which its descendants inherit; when the worker is gone, or the host stops, the
// processes of this user that carry the mark are killed.
#pragma once

#include <cstddef>
#include <string>

namespace orch::process {

inline constexpr const char* worker_instance_variable = "ORCH_WORKER_INSTANCE";

// A new host instance: unique on the machine while this process lives ("<pid>.<start
// time>.<n>"; a process may run several hosts, such as ComfyUI's and a canary's).
std::string new_host_instance();

// SIGKILLs every process (but this one) whose environment holds
// ORCH_WORKER_INSTANCE=<value starting with `prefix`>; returns how many.
std::size_t kill_marked_processes(const std::string& prefix);

}  // namespace orch::process
