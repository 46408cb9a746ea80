// The host memory settings a worker applies to its plugins, and their hash (plugin
// injection). The host sends its settings in the handshake; the worker applies what its manager
// and protocol level can express and publishes the hash of exactly that in its control block.
// The host computes the hash it expects for the same manager and level, so a worker that applied
// something else (a stale build, a lost field) is visible as a mismatch in the memory table.
#pragma once

#include <cstdint>
#include <string>

#include "orch/ipc/handshake.hpp"
#include "orch/plugins/memory_manager.hpp"

namespace orch::plugins {

// The handshake's memory settings (one type on both sides of the handshake: ipc/handshake.hpp).
using host_memory_settings = ipc::memory_settings;

// What a worker running `manager` at protocol `level` applies of `s`, as canonical text:
// settings the level cannot express, and pager settings under the ledger, are left out.
std::string applied_settings_text(const host_memory_settings& s, memory_manager manager,
                                  std::uint32_t level);
// FNV-1a (64 bit) of that text; never 0, so 0 means "not published".
std::uint64_t applied_settings_hash(const host_memory_settings& s, memory_manager manager,
                                    std::uint32_t level);

}  // namespace orch::plugins
