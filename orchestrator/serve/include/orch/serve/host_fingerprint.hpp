// host_fingerprint: the hash a fleet's gateway compares hosts by (issue 58; docs/fleet.md, "What
// a host reports"): two machines with the same deployment and the same installed envs get the
// same one; another pack set, pack version or env lock gives another. It hashes what the
// deployment and its envs are, never where they are: no absolute path, host name, port or time
// goes in, so the same install at another path of another machine is the same host.
//
// It is made of parts, each hashed alone, so that the gateway can name the one that differs:
//   "comfy-orch"  comfy-orch's version, as it is (the plugins and worker installed beside it are
//                 of that version);
//   "deployment"  the parsed deployment's settings (device, memory flags, workers' timings, the
//                 pinned pool, the cache) and its pack set by name; its paths (the file, plugin,
//                 library and pack directories, the env root, the input and output directories)
//                 are left out, which is why the parsed deployment is hashed and not its bytes;
//   "env:<name>"  each env: its pack and node directory by name, the bytes of its
//                 comfy-env.toml and of the pack's comfy-env-root.toml, pyproject.toml and
//                 requirements.txt where present, the pack's git commit where it is a checkout,
//                 the native library's bytes, and the installed env's state, ABI tag, backend and
//                 pixi.lock hash from its env.stamp.json.
// The fingerprint is the sha256 of the parts' "name=value" lines in name order.
#pragma once

#include <string>

#include "orch/fleet/host_report.hpp"
#include "orch/runtime/host_startup.hpp"

namespace orch::serve {

// Reads the files named above (bounded: a file past 1 GiB is hashed as "too large").
fleet::fingerprint_parts fingerprint_parts_of(const runtime::prepared_deployment& deployment,
                                              const std::string& version);

// "sha256:<hex>" of the parts.
std::string fingerprint_of(const fleet::fingerprint_parts& parts);

}  // namespace orch::serve
