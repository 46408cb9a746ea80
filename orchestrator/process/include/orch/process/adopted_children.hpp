// adopted_children: the children of this process it did not start. `comfy-orch serve` and `run`
// own their process and make it a child subreaper, so that a helper a node detached (setsid and a
// double fork) is re-parented to them rather than to init (docs/security.md, "What a worker
// leaves behind"): those that end are reaped as the host's heartbeat comes round, and when the
// host stops every one left is killed, those that cleared their environment (and so the worker's
// mark, leftover_processes.hpp) too. A host inside ComfyUI adopts nothing: ComfyUI's own
// children are not its to reap.
//
// The children the process started on purpose (workers, tools) are counted, so that the reaper
// never takes one for an orphan: fork() and note_spawned() happen under hold_children(), and
// forget_spawned() follows the child's reaping.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <mutex>

namespace orch::process {

std::unique_lock<std::mutex> hold_children();
void note_spawned(pid_t pid);    // under hold_children(), right after fork()
void forget_spawned(pid_t pid);  // once its waitpid() has reaped it

// Makes this process a child subreaper. False, with nothing changed, where the kernel refuses
// or does not list a process's children (/proc/<pid>/task/<tid>/children).
bool adopt_orphans();

// The adopted children that have ended, reaped; how many. Nothing unless adopt_orphans() was.
std::size_t reap_adopted();

// Every adopted child SIGKILLed and reaped (and theirs, adopted in turn); how many.
std::size_t end_adopted();

}  // namespace orch::process
