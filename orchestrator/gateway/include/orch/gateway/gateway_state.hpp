// gateway_state: what the gateway keeps across a restart (docs/fleet.md, "The gateway's state"),
// in one SQLite file ([gateway] state_file): its queue (each prompt with its number, order
// queued, body, extra_data and client, and for a prompt given to a host, that host and whether a
// node of it had started), its history (oldest first, with the bytes the caps count), ComfyUI's
// counter, and the gateway's own id, which names it at its hosts (its client id there) so that a
// restarted gateway hears the events of the prompts it gave them before. Each change is one
// transaction, written through before the change is answered (a prompt before its POST /prompt
// is acknowledged): a SIGKILL right after an answer loses nothing. The file is created with mode
// 600 (prompts are the users'), is held exclusively (a second gateway on it is refused), and a
// file that is no SQLite database or another program's is refused with its name and what to do,
// never taken over. Plain data only: fleet_queue (fleet_queue.hpp) says what changes, in its
// order. Not thread safe: owned by the gateway's io thread, as the queue is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"

struct sqlite3;

namespace orch::gateway {

struct stored_prompt {
  std::string prompt_id;
  double number = 0;
  std::uint64_t sequence = 0;  // order queued, for equal numbers
  nlohmann::json document;
  nlohmann::json extra_data = nlohmann::json::object();
  std::vector<std::string> outputs;
  std::size_t bytes = 0;
  std::optional<std::string> host;  // the host it was given to; nullopt: pending
  bool node_started = false;
};

struct stored_history {
  std::string prompt_id;
  nlohmann::json entry;
  std::size_t bytes = 0;
};

struct stored_state {
  std::string gateway_id;
  double counter = 0;                   // ComfyUI's counter: the next number to give
  std::vector<stored_prompt> prompts;   // pending and given to hosts, in no order
  std::vector<stored_history> history;  // oldest first
};

class gateway_state {
 public:
  // Opens `file`, creating it (mode 600) with an empty state and a new gateway id when it does
  // not exist. Errors (state_unusable, naming the file and what to do): no SQLite database, a
  // database of another program or of a newer format, held by another gateway, unreadable.
  static result<std::unique_ptr<gateway_state>> open(const std::filesystem::path& file);
  ~gateway_state();
  gateway_state(const gateway_state&) = delete;
  gateway_state& operator=(const gateway_state&) = delete;

  // Everything in it; an entry it cannot read is an error naming the file.
  result<stored_state> load();

  // A prompt queued, with the counter after it.
  status put(const stored_prompt& p, double counter);
  // A prompt given to `host` (nullopt: back to pending), and whether a node of it has started.
  status set_host(const std::string& prompt_id, const std::optional<std::string>& host,
                  bool node_started);
  status remove_prompts(const std::vector<std::string>& ids);
  status remove_pending();  // every prompt not given to a host
  // A prompt ended: it leaves the queue and `entry` goes in the history, `dropped` out of it
  // (the caps), in one transaction.
  status finish(const std::string& prompt_id, const stored_history& entry,
                const std::vector<std::string>& dropped);
  status remove_history(const std::vector<std::string>& ids);
  status clear_history();

  const std::filesystem::path& file() const noexcept { return file_; }

 private:
  gateway_state(std::filesystem::path file, sqlite3* db) : file_(std::move(file)), db_(db) {}
  class statement;
  class transaction;
  status failed(const std::string& doing) const;

  std::filesystem::path file_;
  sqlite3* db_;
};

}  // namespace orch::gateway
