// fleet_queue: ComfyUI's PromptQueue kept at the gateway for the whole fleet (docs/fleet.md, "The
// gateway"). Numbers are ComfyUI's counter, negated for `front`; pending prompts are sorted by
// (number, order queued). Unlike serve's queue (serve_queue.hpp), which runs one prompt, any
// pending prompt may be taken, by id, because placement picks which host runs which prompt, and
// several run at once, one a host. A running prompt may go back to pending at its own number and
// place (its host died before any node of it ran). Finished prompts go to a history capped as
// serve caps it (serve::queue_limits: entries and bytes, the oldest dropped first); the caps on
// pending prompts are serve's too. The shapes of /queue and /history are ComfyUI's, as serve's.
// Given a gateway_state (gateway_state.hpp), every change is written through to it as it is made
// (a prompt before put() returns, so before its POST is answered), and restore() takes the queue
// and history back from it after a restart. Owned by the gateway's io thread: not thread safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/fleet/placement.hpp"
#include "orch/gateway/gateway_state.hpp"
#include "orch/serve/serve_queue.hpp"

namespace orch::gateway {

struct fleet_prompt {
  double number = 0;
  std::string prompt_id;
  nlohmann::json document;                               // the API prompt as posted
  nlohmann::json extra_data = nlohmann::json::object();  // client_id included
  // ComfyUI's outputs_to_execute: empty until its host validated it (from the host's history).
  std::vector<std::string> outputs;
  fleet::prompt_needs needs;   // what placement is asked about
  std::size_t bytes = 0;       // the /prompt body's size, for serve's pending caps
  std::uint64_t sequence = 0;  // order queued, for equal numbers

  // ComfyUI's queue item: [number, prompt_id, prompt, extra_data, outputs_to_execute].
  nlohmann::json to_json() const;
  std::string client_id() const;  // extra_data.client_id, or empty
};

struct running_prompt {
  fleet_prompt prompt;
  std::string host;           // the host it was given to
  bool node_started = false;  // an `executing` for one of its nodes came from the host
  // Whether the host has it is not known: the host was lost after the prompt was sent (its POST
  // may be in the host's socket), or the gateway restarted. It stays the host's until the host
  // answers again and says (gateway_hosts.cpp, `settle`), or is known gone.
  bool in_doubt = false;
  std::chrono::steady_clock::time_point in_doubt_since{};
};

class fleet_queue {
 public:
  explicit fleet_queue(std::size_t history_size = serve::prompt_queue::default_history_size,
                       serve::queue_limits limits = {})
      : history_size_(history_size), limits_(limits) {}

  // From here on every change is written to `state` (nullptr: none). Not owned.
  void keep_in(gateway_state* state) { state_ = state; }
  // The queue and history as `stored` holds them (after a restart): prompts given to a host run
  // there again, in doubt; the history's caps are applied (and the entries they drop removed
  // from the state).
  void restore(const stored_state& stored);

  // Called after every change of the pending or running prompts with how many remain.
  void on_change(std::function<void(std::size_t)> fn) { on_change_ = std::move(fn); }

  // Why a prompt of `bytes` cannot be queued now (the queue is full), or nullopt.
  std::optional<std::string> full_for(std::size_t bytes) const;
  // ComfyUI's counter, negated for `front`.
  double next_number(bool front);
  // Written to the state first: an error (the state could not be written) leaves it unqueued.
  status put(fleet_prompt p);

  // In the order they run: (number, order queued).
  const std::vector<fleet_prompt>& pending() const noexcept { return pending_; }
  const std::map<std::string, running_prompt>& running() const noexcept { return running_; }
  // Whether a prompt of this id waits or runs: a client's prompt_id may not name one twice.
  bool holds(const std::string& prompt_id) const;
  running_prompt* running(const std::string& prompt_id);
  // The prompt running on `host`, or nullptr.
  const running_prompt* running_on(const std::string& host) const;
  // Pending prompt `prompt_id` now runs on `host`; false when it is not pending.
  bool take(const std::string& prompt_id, const std::string& host);
  // Running prompt `prompt_id` goes back to pending, at its own number and place.
  void requeue(const std::string& prompt_id);
  // An `executing` for one of its nodes came from its host.
  void node_started(const std::string& prompt_id);
  // Whether its host has it is (not) known (running_prompt::in_doubt).
  void set_in_doubt(const std::string& prompt_id, bool in_doubt);
  // Running prompt `prompt_id` ended: its history entry is {prompt, outputs, status, meta}, its
  // prompt item the gateway's (its number and client), `outputs_to_execute` as its host had it.
  void finish(const std::string& prompt_id, const nlohmann::json& outputs,
              const nlohmann::json& status, const nlohmann::json& meta,
              std::vector<std::string> outputs_to_execute = {});

  void clear_pending();
  // Removes pending prompts by id (running ones are not touched, as ComfyUI). How many.
  std::size_t delete_pending(const std::vector<std::string>& ids);
  std::size_t remaining() const noexcept { return pending_.size() + running_.size(); }

  // {"queue_running": [item...], "queue_pending": [item...]}.
  nlohmann::json queue_json() const;
  // GET /history: the newest `max_items` (all when empty), from `offset` when it is >= 0, in
  // the order they finished (serve's rule, prompt_queue::history_items).
  nlohmann::ordered_json history(std::optional<std::size_t> max_items, std::int64_t offset) const;
  nlohmann::json history_of(const std::string& prompt_id) const;  // {} when unknown
  // Calls `fn` with each history entry's id and entry, oldest first: what the jobs API
  // summarises without copying the history.
  void visit_history(
      const std::function<void(const std::string&, const nlohmann::json&)>& fn) const;
  void clear_history();
  void delete_history(const std::vector<std::string>& ids);
  std::size_t history_size() const noexcept { return history_.size(); }

 private:
  void changed();
  void insert_pending(fleet_prompt p);
  void add_history(const std::string& prompt_id, nlohmann::json entry, std::size_t bytes,
                   std::vector<std::string>& dropped);
  void kept(const status& s) const;  // a write to the state that failed is logged

  std::vector<fleet_prompt> pending_;  // sorted by (number, sequence)
  std::map<std::string, running_prompt> running_;
  struct history_entry {
    std::string id;
    nlohmann::json entry;
    std::size_t bytes;  // twice its JSON text, as serve counts
  };
  std::list<history_entry> history_;  // oldest first
  std::map<std::string, std::list<history_entry>::iterator> by_id_;
  std::size_t history_size_;
  std::size_t history_bytes_ = 0;
  serve::queue_limits limits_;
  double counter_ = 0;
  std::uint64_t sequence_ = 0;
  std::function<void(std::size_t)> on_change_;
  gateway_state* state_ = nullptr;
};

}  // namespace orch::gateway
