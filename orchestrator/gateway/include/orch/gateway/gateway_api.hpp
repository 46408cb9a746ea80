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
// Its members are split by concept over sources: gateway_api.cpp (the routes),
// gateway_hosts.cpp (the hosts, their reports, a host lost), gateway_prompts.cpp (scheduling, a
// prompt sent to its host, the event relay, a prompt's end), gateway_in_doubt.cpp (a prompt whose
// host stopped answering), gateway_files.cpp (the file store: /view and the uploads),
// gateway_inputs.cpp (the input files a prompt names, sent to its host before it) and
// gateway_outputs.cpp (the outputs its host made, copied after it); the official
// frontend's routes and what depends on the packs, proxied to a host, in gateway_frontend.cpp;
// /free and /system_stats over every host in gateway_devices.cpp; the jobs API over the queue in
// gateway_jobs.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
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
#include "orch/gateway/gateway_state.hpp"
#include "orch/gateway/host_link.hpp"
#include "orch/gateway/host_source.hpp"
#include "orch/serve/frontend_routes.hpp"
#include "orch/serve/route_table.hpp"
#include "orch/serve/serve_files.hpp"
#include "orch/serve/serve_http.hpp"

namespace orch::gateway {

struct gateway_options {
  std::optional<std::string> secret;  // sent to every host (serve --fleet-secret-file)
  std::size_t history_size = serve::prompt_queue::default_history_size;
  serve::queue_limits limits;
  fleet::placement_policy policy;
  bool round_robin = false;  // place with the baseline, fleet::round_robin, instead
  // The fleet's fingerprint, as the operator pins it; empty: the first host's to report.
  std::string fingerprint;
  // How often each host is asked whether it answers (GET /orch/fleet/host, its report, which
  // also refreshes its resident models and free device memory), and a host whose stream ended
  // is connected again.
  std::chrono::milliseconds check_period{1000};
  // How long a prompt may stay in doubt (running_prompt::in_doubt) on a host that neither
  // answers nor is known gone, before it ends with comfy_orch.HostLost.
  std::chrono::milliseconds in_doubt_limit{std::chrono::minutes(10)};
  // The official frontend the gateway serves at / (nullopt: none, / says how to get it), and
  // ComfyUI's user directory for its user data and settings ([gateway] user_directory).
  std::optional<std::filesystem::path> frontend_root;
  std::filesystem::path user_directory = "user";
  // The largest upload, which /features and the WebSocket's feature_flags announce.
  std::size_t max_upload = std::size_t{8} << 20;
  // The gateway's file store (fleet_config.hpp): uploads, and the outputs copied from the hosts.
  serve::file_directories files;
  std::uint64_t max_output_file_bytes = std::uint64_t{4} << 30;
  std::size_t max_outputs_per_prompt = 10000;
};

class gateway_api {
 public:
  // `state` (nullptr: nothing is kept across a restart) holds the queue and history `stored` was
  // read from; every change is written there.
  gateway_api(boost::asio::io_context& io, serve::http_server& server, gateway_options options,
              std::unique_ptr<gateway_state> state = nullptr, const stored_state& stored = {});
  ~gateway_api();
  gateway_api(const gateway_api&) = delete;
  gateway_api& operator=(const gateway_api&) = delete;

  void add_routes(serve::route_table& table);
  // What a WebSocket client hears first: ComfyUI's status message with its sid, then, as serve
  // sends them, the running node of its prompt and the prompt's progress.
  std::vector<std::string> greeting(const std::string& sid);
  // A host_source's event. On the io thread.
  void on_host_event(const host_event& e);
  // Starts the periodic check. On the io thread.
  void start();
  // Closes every host's stream and stops the check; nothing is scheduled after it. On the io
  // thread.
  void stop();

  // The WebSocket client id the gateway uses at its hosts: orch-gateway-<its id>, the id kept in
  // its state (the same after a restart, so that the events of a prompt given to a host before
  // it are heard after it); without a state, orch-gateway-<pid>.
  const std::string& client_id() const noexcept { return client_id_; }

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
    bool checking = false;           // a periodic check is on its way
    bool interrupting = false;       // a POST /interrupt is on its way
    std::uint64_t reports_asked = 0;  // GET /orch/fleet/host requests sent, numbered
    std::uint64_t report_taken = 0;   // the number of the newest report taken into its view
    std::string down_reason;         // why it was last lost; empty: never
    bool probing = false;            // probe_gone's request is on its way
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
  // fleet_document() for `comfy-orch status --url`: each host without its node classes, and the
  // newest ten decisions.
  nlohmann::json placement_summary() const;
  nlohmann::json status_message(bool with_sid, const std::string& sid) const;

  // The frontend's routes and the packs' (gateway_frontend.cpp). Added last: its fallback
  // proxies to a host whatever no route of the gateway answers.
  void add_frontend_routes(serve::route_table& table);
  std::optional<serve::http_reply> pack_route(const serve::http_request& req);
  serve::http_reply extensions_list();
  // `method` `target` answered by a host that is up and the fleet's, on the waiting thread:
  // every such host carries the same packs.
  serve::http_reply proxied(std::string method, std::string target, std::string body = {});
  // Where each host that is up and the fleet's listens, by name: copied on the io thread, as a
  // host's link may be replaced there (the host restarted) while a waiting thread asks it.
  std::vector<std::pair<std::string, std::pair<std::string, std::uint16_t>>> answering_hosts();
  // /free and /system_stats (gateway_devices.cpp): every answering host asked at once, on the
  // waiting thread.
  serve::http_reply free(const serve::http_request& req);
  serve::http_reply system_stats();
  std::vector<std::pair<std::string, result<host_answer>>> ask_every_host(
      const std::string& method, const std::string& target, const std::string& body);
  // The jobs API over the gateway's queue (gateway_jobs.cpp).
  std::optional<serve::http_reply> jobs(const serve::http_request& req);
  // Tells the host of each running prompt `which` accepts to interrupt it.
  void interrupt_running(const std::function<bool(const std::string&)>& which);
  // Runs `fn` on the io thread and returns what it returned: at once there, else waiting.
  template <typename Fn>
  auto on_io(Fn fn) -> decltype(fn());

  // The live views across the hosts (gateway_live.cpp): each host that is up asked at once on
  // the io thread, waited for on the waiting thread with a bound.
  struct host_reply {
    std::string host;
    std::optional<host_answer> answer;  // nullopt: not asked (down) or no answer
    std::string error;                  // why there is no answer
  };
  void add_live_routes(serve::route_table& table);
  std::vector<host_reply> ask_every_host(const std::string& target, std::size_t max_bytes);
  serve::http_reply live_document(const std::string& target, bool with_divergent);
  serve::http_reply fleet_metrics();

  // Hosts (gateway_hosts.cpp); scheduling and events (gateway_prompts.cpp); prompts in doubt
  // (gateway_in_doubt.cpp).
  void connect(const std::string& name);
  void read_facts(const std::string& name);
  // Takes a host's answer to GET /orch/fleet/host into its view; false (and last_error) when
  // there is no report in it.
  // `asked` is the request's number (host::reports_asked): a report older than the view's is
  // proof the host answers, and no more.
  bool take_report(const std::string& name, const result<host_answer>& a, std::uint64_t asked);
  // Reads the host's report into its view, then runs `then` (whether or not it could be read).
  void read_report_then(const std::string& name, std::function<void()> then);
  // Sets the host's refusal from its fingerprint against the fleet's (empty: it is the fleet's).
  void judge_fingerprint(const std::string& name);
  void check_hosts();
  // `gone`: its process is known to be gone (its source says so, or nothing listens at its
  // address), so a prompt sent to it that no node of which had started may run elsewhere;
  // otherwise such a prompt is in doubt there until it answers again.
  void host_lost(const std::string& name, const std::string& why, bool gone = false);
  void on_host_message(const std::string& name, const std::string& text);
  // A binary frame from a host (gateway_previews.cpp): a preview or a progress text, to the
  // client of the prompt it belongs to.
  void on_host_frame(const std::string& name, const std::string& frame);
  void schedule();
  // `again`: settle sends it a second time, and a host that answers prompt_id_known got the first
  // (asked again); on a first send that answer is a refusal (the id was used before).
  void send_to_host(const std::string& prompt_id, const std::string& name, bool again = false,
                    int tries_left = 2);
  // A prompt in doubt on a host that answers again (running_prompt::in_doubt): the host's queue
  // and history say whether it has it; one it never got is sent to it again (serve refuses a
  // prompt_id it holds, so a POST that did arrive is never run twice); one a node of which had
  // started that the host no longer knows ends with comfy_orch.HostLost.
  void settle(const std::string& prompt_id, const std::string& name, int tries_left = 2);
  // Prompts in doubt on hosts that are known gone, or past options_.in_doubt_limit.
  void settle_lost(const std::string& name, bool gone, const std::string& why);
  // Whether host `name` is known not to run (nothing listens at its address): a prompt in doubt
  // there can run elsewhere.
  void probe_gone(const std::string& name);
  // The prompt's entry in its host's answer `a` to GET /history/<id>; nullopt: none there.
  static std::optional<nlohmann::json> history_entry(const std::string& prompt_id,
                                                     const result<host_answer>& a);
  // The prompt ends at the gateway with its host's history entry (its outputs copied): the
  // host's report is read again first (the models it loaded are warm for the next prompt), then
  // finish_from_entry.
  void finish_prompt(const std::string& prompt_id, const std::string& name, nlohmann::json entry);
  void finish_from_entry(const std::string& prompt_id, const nlohmann::json& entry);
  void fetch_history(const std::string& prompt_id, const std::string& name, int tries_left);

  // Files (gateway_files.cpp, gateway_inputs.cpp, gateway_outputs.cpp).
  void add_file_routes(serve::route_table& table);
  // Sends the prompt's input files (input_files_of) that the host lacks, one at a time, then
  // POSTs the prompt (send_to_host, with `again` and `tries_left`); a file that cannot be sent
  // ends the prompt with an error naming the host and the file.
  void send_inputs(const std::string& prompt_id, const std::string& name, bool again = false,
                   int tries_left = 2);
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
  // The prompt ends with ComfyUI's execution_error of `exception_type`, sent to its client and
  // put in the history.
  void fail_running(const std::string& prompt_id, const std::string& exception_type,
                    const std::string& message);
  void note(const std::string& prompt_id, const fleet::placement& p);
  std::uint64_t now_tick() const;

  boost::asio::io_context& io_;
  serve::http_server& server_;
  gateway_options options_;
  std::unique_ptr<gateway_state> state_;
  std::string client_id_;
  serve::file_routes files_;  // serve's /view and uploads, over the gateway's store
  fleet_queue queue_;
  std::map<std::string, host> hosts_;     // by name
  std::string fleet_fingerprint_;         // pinned, else the first host's to report
  fleet::fingerprint_parts fleet_parts_;  // its parts, for naming a difference
  // Prompts whose events a host relays, to the client that queued them (kept until their
  // `executing` for no node).
  std::map<std::string, std::string> relay_;
  fleet::round_robin round_robin_;                  // when options_.round_robin
  std::set<std::string> settling_;                  // prompts settle() asks a host about now
  // Each running prompt's last `executing` for a node and `progress_state`, as its host sent
  // them: what greeting() sends its client when it connects again.
  struct live_prompt {
    std::string executing;
    std::string progress;
  };
  std::map<std::string, live_prompt> live_;
  // Each prompt's `executing` for no node, to its client, held until its history entry is in
  // the gateway's (ComfyUI's order): prompt id -> (client, the message).
  std::map<std::string, std::pair<std::string, std::string>> ended_;
  // Running prompts whose host has sent their outcome (execution_success, _error or
  // _interrupted): a client may read the history at once (the saintno SDK does, at the last
  // output's `executed`), so GET /history/{id} of one waits for its entry.
  std::set<std::string> ending_;
  std::deque<decision> decisions_;                  // the newest 100
  std::map<std::string, std::string> last_reason_;  // a waiting prompt's last noted reason
  boost::asio::steady_timer check_timer_;
  serve::frontend_routes web_;       // the frontend's files, user data, templates, "none here"
  serve::frontend_files own_files_;  // the frontend's own core extensions (its extensions/)
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
