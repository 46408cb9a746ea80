// gateway_api: ComfyUI's API for a fleet of `comfy-orch serve` hosts (docs/fleet.md, "The
// gateway"). The queue (fleet_queue.hpp) stays here; placement (orch::fleet::place) picks which
// free host runs which pending prompt; a prompt given to a host is POSTed there under the
// gateway's prompt id with the gateway's client id, so the events the host sends on its
// WebSocket carry the id the client knows and are relayed to that client, in order. When a
// prompt ends (the host's `executing` for no node, which serve sends after every outcome), its
// entry is fetched from the host's /history into the gateway's, the host is free again and
// the queue is scheduled.
//
// One thread owns it all: the io thread, which runs the hosts' requests and event streams
// asynchronously (host_link.hpp) and never waits on a host. Routes answered on another thread
// (http_server's API thread) run their part on the io thread and wait for it (a short wait: the
// io thread never blocks); /object_info, proxied to a host, waits on http_server's waiting
// thread.
//
// Its members are split by concept over three sources: gateway_api.cpp (the routes),
// gateway_hosts.cpp (the hosts, scheduling, the event relay, a host lost) and gateway_files.cpp
// (the gateway's file store: /view and the uploads, the input files a prompt names sent to its
// host before it, and the outputs its history names copied from its host after it).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "orch/fleet/host_report.hpp"
#include "orch/fleet/placement.hpp"
#include "orch/gateway/fleet_queue.hpp"
#include "orch/gateway/host_link.hpp"
#include "orch/gateway/host_source.hpp"
#include "orch/serve/route_table.hpp"
#include "orch/serve/serve_files.hpp"
#include "orch/serve/serve_http.hpp"

namespace orch::gateway {

struct gateway_options {
  std::optional<std::string> secret;  // sent to every host (serve --fleet-secret-file)
  std::size_t history_size = serve::prompt_queue::default_history_size;
  serve::queue_limits limits;
  fleet::placement_policy policy;
  // The fleet's fingerprint, as the operator pins it; empty: the first host's to report.
  std::string fingerprint;
  // How often each host is asked whether it answers (GET /orch/fleet/host, its report, which
  // also refreshes its resident models and free device memory), and a host whose stream ended
  // is connected again.
  std::chrono::milliseconds check_period{1000};
  // The gateway's file store (fleet_config.hpp): uploads, and the outputs copied from the hosts.
  serve::file_directories files;
  std::uint64_t max_output_file_bytes = std::uint64_t{4} << 30;
  std::size_t max_outputs_per_prompt = 10000;
};

class gateway_api {
 public:
  gateway_api(boost::asio::io_context& io, serve::http_server& server, gateway_options options);
  ~gateway_api();
  gateway_api(const gateway_api&) = delete;
  gateway_api& operator=(const gateway_api&) = delete;

  void add_routes(serve::route_table& table);
  // What a WebSocket client hears first: ComfyUI's status message with its sid.
  std::vector<std::string> greeting(const std::string& sid);
  // A host_source's event. On the io thread.
  void on_host_event(const host_event& e);
  // Starts the periodic check. On the io thread.
  void start();
  // Closes every host's stream and stops the check; nothing is scheduled after it. On the io
  // thread.
  void stop();

  // The WebSocket client id the gateway uses at its hosts: orch-gateway-<pid>.
  static std::string client_id();

 private:
  struct host {
    fleet::host_view view;  // view.up: listed, its stream open and its report read
    std::string url;
    long pid = 0;  // serve's process id on its node, when its source says it
    std::unique_ptr<host_link> link;
    bool listed = false;      // its source says it is up
    bool connecting = false;  // its stream is being opened
    bool stream_open = false;
    bool has_classes = false;        // its report has been read
    bool reading_facts = false;      // its report is being read
    fleet::fingerprint_parts parts;  // its fingerprint's parts, from its report
    std::string refusal;             // why its fingerprint is not the fleet's; empty: it is
    std::string last_error;          // why its report could not be read, last time; empty: it could
    bool checking = false;           // a /system_stats check is on its way
    // The input files this host's serve has been sent ("<subfolder/name> <sha256>"), forgotten
    // when its stream opens again (its serve may be another, with other files), and how many
    // were sent in all. `serve_generation` counts its streams opened, so that an upload
    // answered after the host came back is not taken for the new serve's.
    std::set<std::string> inputs_held;
    std::uint64_t inputs_sent = 0;
    std::uint64_t serve_generation = 0;
  };
  struct decision {
    std::string prompt_id;
    fleet::placement placement;
    std::uint64_t tick = 0;
  };

  // Routes (gateway_api.cpp).
  serve::http_reply post_prompt(const serve::http_request& req);
  serve::http_reply post_queue(const serve::http_request& req);
  serve::http_reply history(const serve::http_request& req);
  serve::http_reply post_history(const serve::http_request& req);
  serve::http_reply object_info(const serve::http_request& req);
  serve::http_reply interrupt(const serve::http_request& req);
  nlohmann::json fleet_document() const;
  nlohmann::json status_message(bool with_sid, const std::string& sid) const;
  // Runs `fn` on the io thread and returns what it returned: at once there, else waiting.
  template <typename Fn>
  auto on_io(Fn fn) -> decltype(fn());

  // Hosts, scheduling and events (gateway_hosts.cpp).
  void connect(const std::string& name);
  void read_facts(const std::string& name);
  // Takes a host's answer to GET /orch/fleet/host into its view; false (and last_error) when
  // there is no report in it.
  bool take_report(const std::string& name, const result<host_answer>& a);
  // Sets the host's refusal from its fingerprint against the fleet's (empty: it is the fleet's).
  void judge_fingerprint(const std::string& name);
  void check_hosts();
  void host_lost(const std::string& name, const std::string& why);
  void on_host_message(const std::string& name, const std::string& text);
  void schedule();
  void fetch_history(const std::string& prompt_id, const std::string& name, int tries_left);

  // Files (gateway_files.cpp).
  void add_file_routes(serve::route_table& table);
  // Sends the prompt's input files (input_files_of) that the host lacks, one at a time, then
  // POSTs the prompt (post_to_host); a file that cannot be sent ends the prompt with an error
  // naming the host and the file.
  void send_inputs(const std::string& prompt_id, const std::string& name);
  void post_to_host(const std::string& prompt_id, const std::string& name);
  // Copies every output file of the host's history `entry` not copied yet into the gateway's
  // store, one at a time, then puts the entry in the history (finish_prompt); a file that cannot
  // be copied ends the prompt with an error naming the host and the file.
  void copy_outputs(const std::string& prompt_id, const std::string& name, nlohmann::json entry);
  // A running prompt's event from its host, in order: an `executed` event that names output
  // files is sent to the client once they are copied (a client asks /view for them at once),
  // and the events after it wait behind it; the `executing` for no node ends the relay and reads
  // the host's history entry.
  void relay_event(const std::string& name, const std::string& prompt_id, const std::string& text);
  // Sends the events that waited behind a copy, until the next copy.
  void relay_held(const std::string& name, const std::string& prompt_id);
  void forget_files(const std::string& prompt_id);
  struct input_send;   // a prompt's input files on their way to its host
  struct output_copy;  // a prompt's output files on their way from its host
  void send_next_input(std::shared_ptr<input_send> send);
  void copy_next_output(std::shared_ptr<output_copy> copy);
  // A running prompt's files in flight: the events held behind a copy (at most
  // max_held_event_bytes; past it they are sent without waiting), and the output files copied.
  struct prompt_files {
    std::deque<std::string> held;
    std::size_t held_bytes = 0;
    bool copying = false;
    std::set<std::string> copied;  // "<type>/<subfolder/name>"
    std::set<std::string> tried;   // the same, of the copies its `executed` events began
    // The name a file was stored under where its own was taken by other bytes, by key.
    std::map<std::string, std::string> stored;
  };
  std::map<std::string, prompt_files> prompt_files_;  // by prompt id
  void finish_prompt(const std::string& prompt_id, const nlohmann::json& entry);
  // The prompt ends with ComfyUI's execution_error of `exception_type`, sent to its client and
  // put in the history.
  void fail_running(const std::string& prompt_id, const std::string& exception_type,
                    const std::string& message);
  void note(const std::string& prompt_id, const fleet::placement& p);
  std::uint64_t now_tick() const;

  boost::asio::io_context& io_;
  serve::http_server& server_;
  gateway_options options_;
  serve::file_routes files_;  // serve's /view and uploads, over the gateway's store
  fleet_queue queue_;
  std::map<std::string, host> hosts_;     // by name
  std::string fleet_fingerprint_;         // pinned, else the first host's to report
  fleet::fingerprint_parts fleet_parts_;  // its parts, for naming a difference
  // Prompts whose events a host relays, to the client that queued them (kept until their
  // `executing` for no node).
  std::map<std::string, std::string> relay_;
  std::deque<decision> decisions_;                  // the newest 100
  std::map<std::string, std::string> last_reason_;  // a waiting prompt's last noted reason
  boost::asio::steady_timer check_timer_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  bool stopped_ = false;
};

template <typename Fn>
auto gateway_api::on_io(Fn fn) -> decltype(fn()) {
  if (io_.get_executor().running_in_this_thread()) return fn();
  std::packaged_task<decltype(fn())()> task(std::move(fn));
  auto done = task.get_future();
  boost::asio::post(io_, [&task] { task(); });
  return done.get();
}

}  // namespace orch::gateway
