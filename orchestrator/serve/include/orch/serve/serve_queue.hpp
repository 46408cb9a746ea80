// serve_queue: ComfyUI's PromptQueue for `comfy-orch serve` (docs/serve.md; execution.py's
// shapes, not its code): one prompt runs at a time, the lowest number first (a `front` prompt
// gets a negative number), ties in the order queued; every finished prompt goes to a history
// capped at `history_size` entries and `max_history_bytes`, the oldest dropped first. Thread
// safe: the HTTP handlers queue and read, the io thread takes and finishes (serve_api.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "orch/executor/prompt.hpp"

namespace orch::serve {

struct queued_prompt {
  std::size_t bytes = 0;  // the /prompt body's size: what the pending queue's cap counts
  double number = 0;
  std::string prompt_id;
  nlohmann::json document;  // the API prompt as posted
  nlohmann::json extra_data = nlohmann::json::object();  // client_id included
  std::vector<std::string> outputs;                      // the validated output node ids
  executor::prompt parsed;
  std::uint64_t sequence = 0;  // order of arrival, for equal numbers
  // to_json()'s text, written when it is queued (put): GET /queue streams it, shared.
  std::shared_ptr<const std::string> text;

  // ComfyUI's queue item: [number, prompt_id, prompt, extra_data, outputs_to_execute].
  nlohmann::json to_json() const;
  std::string client_id() const;  // extra_data.client_id, or empty
};

// The pending queue's caps (ComfyUI has none: 100 prompts of 7 MiB had held 1.5 GB). A parsed
// prompt takes about four times its body, and its text (for GET /queue, streamed) once more, so
// 32 MiB of bodies is some 160 MiB of memory.
struct queue_limits {
  std::size_t max_pending = 1000;
  std::size_t max_pending_bytes = std::size_t{32} << 20;
  // The history's bytes (each entry counted as twice its JSON text, kept parsed and as text):
  // 10000 entries of large prompts or `ui` outputs would otherwise hold gigabytes. The newest entry
  // is kept whatever its size, so that the client that queued it can read it.
  std::size_t max_history_bytes = std::size_t{128} << 20;
};

class prompt_queue {
 public:
  // ComfyUI's MAXIMUM_HISTORY_SIZE.
  static constexpr std::size_t default_history_size = 10000;

  explicit prompt_queue(std::size_t history_size = default_history_size, queue_limits limits = {})
      : history_size_(history_size), limits_(limits) {}

  // Why a prompt of `bytes` cannot be queued now (the queue is full), or nullopt.
  std::optional<std::string> full_for(std::size_t bytes) const;

  // Called with the number of prompts remaining after every change (ComfyUI's queue_updated),
  // outside the queue's lock.
  void on_change(std::function<void(std::size_t)> fn);

  // Gives the prompt its number (ComfyUI's counter, negated for `front`) unless it has one.
  double next_number(bool front);
  void put(queued_prompt p);
  // put(), unless a prompt of its id is pending, running or in the history: false then, and
  // nothing queued. Checked and queued under one lock, so that of two POSTs of one prompt_id
  // (a gateway sending again a prompt whose first POST went unanswered) one runs.
  bool put_new(queued_prompt p);
  // The next prompt, now running; empty when none is pending or once stop() was called.
  std::optional<queued_prompt> try_take();
  // The running prompt is done: its history entry is {prompt, outputs, status, meta}.
  void finish(const nlohmann::json& outputs, const nlohmann::json& status);
  void stop();

  // remaining() and running_id() never wait for the queue's lock while a history is copied
  // under it: the io thread asks them (serve_api.hpp).
  std::size_t remaining() const { return remaining_.load(); }
  // The running and the pending prompts as their items' texts (queued_prompt::text), shared:
  // what GET /queue streams as {"queue_running": [...], "queue_pending": [...]}.
  struct queue_texts {
    std::vector<std::shared_ptr<const std::string>> running, pending;
  };
  queue_texts texts() const;
  void clear_pending();
  // Removes pending prompts by id; the running one is not touched (ComfyUI). Returns how many
  // it removed.
  std::size_t delete_pending(const std::vector<std::string>& ids);
  std::optional<std::string> running_id() const;
  std::string running_client_id() const;

  // GET /history: the newest `max_items` (all when empty), from `offset` when it is >= 0, in
  // the order the prompts finished (ComfyUI's dict order). The entries are shared, not copied,
  // each with its JSON text, written once when it was finished: an answer streams slices of the
  // texts to its client however long it reads (serve_api.cpp), never serialising on the io
  // thread.
  struct history_item {
    std::string id;
    std::shared_ptr<const nlohmann::json> entry;
    std::shared_ptr<const std::string> text;
  };
  std::vector<history_item> history_items(std::optional<std::size_t> max_items,
                                          std::int64_t offset) const;
  // The same as one document, hence ordered_json.
  nlohmann::ordered_json history(std::optional<std::size_t> max_items, std::int64_t offset) const;
  nlohmann::json history_of(const std::string& prompt_id) const;  // {} when unknown
  // Calls `fn` with the running prompt (true) and each pending one (false), under the queue's
  // lock (`fn` must not call the queue).
  void visit_queue(const std::function<void(const queued_prompt&, bool running)>& fn) const;
  // Calls `fn` with each history entry's id and entry, oldest first, under the queue's lock
  // (`fn` must not call the queue): what the jobs API summarises without copying the history.
  void visit_history(
      const std::function<void(const std::string&, const nlohmann::json&)>& fn) const;
  void clear_history();
  void delete_history(const std::vector<std::string>& ids);
  std::size_t history_size() const;

 private:
  void changed(std::unique_lock<std::mutex>& lock);
  void insert_pending(queued_prompt p, std::unique_lock<std::mutex>& lock);  // under mutex_

  mutable std::mutex mutex_;
  std::vector<queued_prompt> pending_;  // sorted by (number, sequence)
  std::optional<queued_prompt> running_;
  struct history_entry {
    std::string id;
    std::shared_ptr<const nlohmann::json> entry;  // never changed once written
    std::shared_ptr<const std::string> text;      // entry's JSON
    std::size_t bytes;  // what max_history_bytes counts
  };
  std::list<history_entry> history_;  // oldest first
  std::map<std::string, std::list<history_entry>::iterator> by_id_;
  std::size_t history_size_;
  std::size_t history_bytes_ = 0;
  void erase_history(std::list<history_entry>::iterator at);  // under mutex_
  queue_limits limits_;
  std::size_t pending_bytes_ = 0;
  double counter_ = 0;
  std::uint64_t sequence_ = 0;
  bool stopped_ = false;
  std::function<void(std::size_t)> on_change_;
  // Copies for readers that must not wait while a history is copied under mutex_; written
  // under mutex_ (running_id_ under its own lock too, taken second).
  std::atomic<std::size_t> remaining_{0};
  mutable std::mutex running_id_mutex_;
  std::optional<std::string> running_id_;
};

}  // namespace orch::serve
