// gateway_api's output files (gateway_api.hpp; docs/fleet.md, "Files across hosts"): a prompt's
// output files come from its host after it, before its history entry is published, and those an
// `executed` event names before that event reaches the client (the events after it wait behind
// it). Everything a host names is untrusted: its files land only inside the gateway's directories
// (confined_path.hpp), each within a byte cap, and a prompt's entry names at most a capped number.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>

#include <spdlog/spdlog.h>

#include "orch/executor/prompt.hpp"
#include "orch/gateway/errc.hpp"
#include "orch/gateway/gateway_api.hpp"
#include "orch/serve/confined_path.hpp"
#include "orch/serve/upload_store.hpp"
#include "orch/support/sha256.hpp"
#include "orch/support/untrusted_text.hpp"
#include "file_names.hpp"


namespace orch::gateway {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {
// The most bytes of events held behind a copy: past it, they go on without waiting (a host that
// floods events while its file crawls must not grow the gateway without end).
constexpr std::size_t max_held_event_bytes = std::size_t{64} << 20;


struct output_file {
  std::string type;  // output or temp
  std::string subfolder;
  std::string filename;
  std::string shown() const { return (subfolder.empty() ? "" : subfolder + "/") + filename; }
  std::string key() const { return type + "/" + shown(); }
};

// The file one item of a node's output names ({filename, subfolder, type}), its subfolder
// written as confined_path reads it; nullopt for an item that names no file of the host's
// output or temp directory (an input was the gateway's to begin with). Errors: bad_output_path, a
// name that is no plain file name or a subfolder that leaves its directory (the message names
// it).
result<std::optional<output_file>> output_file_of(const json& item, const std::string& node_id) {
  if (!item.is_object()) return std::optional<output_file>();
  const auto filename = item.find("filename");
  const auto type = item.find("type");
  if (filename == item.end() || !filename->is_string() || type == item.end() || !type->is_string())
    return std::optional<output_file>();
  output_file f{type->get<std::string>(), "", filename->get<std::string>()};
  if (f.type != "output" && f.type != "temp") return std::optional<output_file>();
  if (const auto sub = item.find("subfolder"); sub != item.end() && sub->is_string())
    f.subfolder = sub->get<std::string>();
  auto subfolder = serve::relative_components(f.subfolder);
  if (!serve::plain_file_name(f.filename) || !subfolder)
    return error{gateway_errc::bad_output_path, "its output file '" + f.shown() + "' (node " + node_id +
                                 ") leaves the " + f.type + " directory"};
  f.subfolder = joined(*subfolder);
  return std::optional(std::move(f));
}

// Adds the files one node's output names to `files` (ComfyUI's shape: output[kind] is a list of
// items), each once (`listed` holds their keys), and none in `skip`. Errors: as output_file_of,
// and more than `cap` files in all.
status add_node_files(const std::string& node_id, const json& node, std::size_t cap,
                      const std::set<std::string>& skip, std::set<std::string>& listed,
                      std::vector<output_file>& files) {
  if (!node.is_object()) return ok_status();
  for (const auto& [kind, list] : node.items()) {
    if (!list.is_array()) continue;
    for (const auto& item : list) {
      auto f = output_file_of(item, node_id);
      if (!f) return f.err();
      if (!*f || skip.contains((*f)->key()) || !listed.insert((*f)->key()).second) continue;
      if (files.size() == cap)
        return error{gateway_errc::too_many_outputs,
                     "it names more than " + std::to_string(cap) +
                         " output files (the gateway's [gateway] max_outputs_per_prompt)"};
      files.push_back(std::move(**f));
    }
  }
  return ok_status();
}

// The files a history entry's outputs name (outputs[node] is a node's output), but those in
// `skip`. As add_node_files.
result<std::vector<output_file>> output_files_of(const json& entry, std::size_t cap,
                                                 const std::set<std::string>& skip) {
  std::vector<output_file> files;
  std::set<std::string> listed;
  const auto outputs = entry.find("outputs");
  if (outputs == entry.end() || !outputs->is_object()) return files;
  for (const auto& [node_id, node] : outputs->items())
    if (auto added = add_node_files(node_id, node, cap, skip, listed, files); !added)
      return added.err();
  return files;
}

// Gives each item of a node's output that names a file stored under another name at the
// gateway (`stored`, by key: its name was taken by other bytes) that name. Whether any changed.
bool rename_stored(json& node, const std::map<std::string, std::string>& stored) {
  bool changed = false;
  if (stored.empty() || !node.is_object()) return false;
  for (auto& [kind, list] : node.items()) {
    if (!list.is_array()) continue;
    for (auto& item : list) {
      auto f = output_file_of(item, "");
      if (!f || !*f) continue;
      if (const auto it = stored.find((*f)->key()); it != stored.end()) {
        item["filename"] = it->second;
        changed = true;
      }
    }
  }
  return changed;
}

}  // namespace

struct gateway_api::output_copy {
  std::string prompt_id;
  std::string host;
  std::vector<output_file> files;
  std::size_t next = 0;
  // Once every file is copied (nullopt), or one could not be (why, naming the file); not when
  // the prompt has left the host meanwhile.
  std::function<void(std::optional<std::string>)> done;
};


void gateway_api::copy_outputs(const std::string& prompt_id, const std::string& name, json entry) {
  const auto known = prompt_files_.find(prompt_id);
  auto files = output_files_of(
      entry, options_.max_outputs_per_prompt,
      known == prompt_files_.end() ? std::set<std::string>{} : known->second.copied);
  if (!files) {
    spdlog::warn("gateway: {}: prompt {}: {}", name, prompt_id, printable(files.err().message));
    fail_running(prompt_id, "comfy_orch.OutputNotCopied",
                 "host " + name + " (" + hosts_.at(name).url + ") ended the prompt, but " +
                     files.err().message + "; nothing of it was copied");
    schedule();
    return;
  }
  auto copy = std::make_shared<output_copy>();
  copy->prompt_id = prompt_id;
  copy->host = name;
  copy->files = std::move(*files);
  copy->done = [this, prompt_id, name, url = hosts_.at(name).url,
                entry = std::move(entry)](std::optional<std::string> failed) mutable {
    if (!failed) {
      // The names the gateway stored them under, where another file had the host's name.
      if (const auto pf = prompt_files_.find(prompt_id);
          pf != prompt_files_.end() && entry.contains("outputs") && entry["outputs"].is_object())
        for (auto& [node_id, node] : entry["outputs"].items())
          rename_stored(node, pf->second.stored);
      return finish_prompt(prompt_id, name, std::move(entry));
    }
    fail_running(prompt_id, "comfy_orch.OutputNotCopied",
                 "host " + name + " (" + url + ") ended the prompt, but " + *failed);
    schedule();
  };
  copy_next_output(std::move(copy));
}

void gateway_api::copy_next_output(std::shared_ptr<output_copy> copy) {
  const running_prompt* r = queue_.running(copy->prompt_id);
  if (stopped_ || r == nullptr || r->host != copy->host) return;
  if (copy->next == copy->files.size()) return copy->done(std::nullopt);
  host& h = hosts_.at(copy->host);
  const output_file& f = copy->files[copy->next];
  const auto failed = [copy](const std::string& file, const std::string& why) {
    spdlog::warn("gateway: {}: prompt {}: output file '{}' not copied: {}", copy->host,
                 copy->prompt_id, printable(file), printable(why));
    copy->done("its output file '" + file + "' could not be copied to the gateway: " + why);
  };
  const fs::path& root = f.type == "temp" ? options_.files.temp : options_.files.output;
  auto subfolder = serve::relative_components(f.subfolder);  // checked by output_files_of
  auto dir = serve::open_confined_directory(
      root, subfolder ? *subfolder : std::vector<std::string>{}, true);
  if (!dir) return failed(f.shown(), dir.err().message);
  auto temp = serve::create_temporary_file(dir->get());
  if (!temp) return failed(f.shown(), temp.err().message);
  // The directory and the temporary file live as long as the download.
  struct target {
    ipc::unique_fd dir;
    std::string temp;
    ipc::unique_fd file;
    ~target() {
      if (!temp.empty()) ::unlinkat(dir.get(), temp.c_str(), 0);
    }
  };
  auto at = std::make_shared<target>();
  at->dir = std::move(*dir);
  at->temp = std::move(temp->first);
  at->file = std::move(temp->second);
  const int fd = at->file.get();
  h.link->download("/view?filename=" + percent_encoded(f.filename) +
                       "&subfolder=" + percent_encoded(f.subfolder) + "&type=" + f.type,
                   fd, options_.max_output_file_bytes,
                   [this, copy, at, failed](result<host_link::download_answer> a) {
                     const running_prompt* now = queue_.running(copy->prompt_id);
                     if (stopped_ || now == nullptr || now->host != copy->host) return;
                     const output_file& got = copy->files[copy->next];
                     if (!a) return failed(got.shown(), a.err().message);
                     if (a->status != 200)
                       return failed(got.shown(), "its /view answered HTTP " +
                                                      std::to_string(a->status) + ": " +
                                                      printable(a->refusal));
                     at->file.reset();
                     const std::string written = std::exchange(at->temp, std::string());
                     // Never over another file: each host numbers its outputs from its own
                     // directory, so two hosts name different images alike (ComfyUI_00001_.png);
                     // the later is stored under the next free `stem (N).ext` and the prompt's
                     // entry and events name it so.
                     auto placed = serve::place_temporary(at->dir.get(), written, got.filename);
                     if (!placed) return failed(got.shown(), placed.err().message);
                     prompt_files& pf = prompt_files_[copy->prompt_id];
                     pf.copied.insert(got.key());
                     if (*placed != got.filename) pf.stored[got.key()] = *placed;
                     ++copy->next;
                     copy_next_output(copy);
                   });
}

void gateway_api::forget_files(const std::string& prompt_id) {
  prompt_files_.erase(prompt_id);
}

void gateway_api::relay_event(const std::string& name, const std::string& prompt_id,
                              const std::string& text) {
  prompt_files& pf = prompt_files_[prompt_id];
  if (pf.copying) {
    if (pf.held_bytes + text.size() <= max_held_event_bytes) {
      pf.held.push_back(text);
      pf.held_bytes += text.size();
      return;
    }
    // Past the cap: what waited goes now, in order, and this event after it; the copy goes on.
    pf.copying = false;
    relay_held(name, prompt_id);
    if (pf.copying) {  // a held `executed` began another copy: this waits behind it
      pf.held.push_back(text);
      pf.held_bytes += text.size();
      return;
    }
  }
  // The event was read by on_host_message (its shape checked there); read again for what
  // matters here.
  const auto parsed = executor::parse_bounded_json(text);
  if (!parsed || !parsed->is_object()) return;
  const auto data_field = parsed->find("data");
  const auto type_field = parsed->find("type");
  if (data_field == parsed->end() || !data_field->is_object() || type_field == parsed->end() ||
      !type_field->is_string())
    return;
  const std::string& type = type_field->get_ref<const std::string&>();
  const json& data = *data_field;
  const auto client = relay_.find(prompt_id);
  if (client == relay_.end()) return;
  if (type == "executed" && !pf.copying) {
    std::vector<output_file> files;
    std::set<std::string> listed;
    const std::string node = data.contains("node") && data["node"].is_string()
                                 ? data["node"].get<std::string>()
                                 : std::string("?");
    // A bad name, or more files than a prompt's entry may name (its events together, so that a
    // host cannot have the gateway copy without end while the prompt runs), is left to the
    // history's copy, which ends the prompt.
    const std::size_t cap = options_.max_outputs_per_prompt;
    if (const auto output = data.find("output");
        output != data.end() && add_node_files(node, *output, cap, pf.tried, listed, files) &&
        !files.empty() && pf.tried.size() + files.size() <= cap) {
      pf.copying = true;
      pf.held.push_front(text);
      pf.held_bytes += text.size();
      // Tried once here: this event, relayed from the held ones after the copy, starts no other.
      for (const auto& f : files) pf.tried.insert(f.key());
      auto copy = std::make_shared<output_copy>();
      copy->prompt_id = prompt_id;
      copy->host = name;
      copy->files = std::move(files);
      copy->done = [this, prompt_id, name](std::optional<std::string>) {
        const auto it = prompt_files_.find(prompt_id);
        if (it == prompt_files_.end()) return;
        // Copied or not, the event goes on: a file not copied (not in `copied`) is tried again
        // with the history entry, which ends the prompt naming it if it still cannot be.
        it->second.copying = false;
        relay_held(name, prompt_id);
      };
      copy_next_output(std::move(copy));
      return;
    }
  }
  if (type == "executed" && !pf.stored.empty() && data.contains("output")) {
    json renamed = *parsed;
    if (rename_stored(renamed["data"]["output"], pf.stored)) {
      if (!client->second.empty())
        server_.send(client->second, renamed.dump(-1, ' ', false, json::error_handler_t::replace));
      return;
    }
  }
  const auto node = data.find("node");
  if (type == "executing" && node != data.end() && node->is_null()) {
    // ComfyUI writes a prompt's history before its `executing` for no node, and clients read
    // the history when they hear it (the saintno SDK): held until the entry is in the gateway's.
    if (!client->second.empty()) ended_[prompt_id] = {client->second, text};
    live_.erase(prompt_id);
    relay_.erase(client);
    fetch_history(prompt_id, name, 200);
    return;
  }
  if (!client->second.empty()) server_.send(client->second, text);
}

void gateway_api::relay_held(const std::string& name, const std::string& prompt_id) {
  for (;;) {
    const auto it = prompt_files_.find(prompt_id);
    const running_prompt* r = queue_.running(prompt_id);
    if (stopped_ || it == prompt_files_.end() || r == nullptr || r->host != name) return;
    prompt_files& pf = it->second;
    if (pf.copying || pf.held.empty()) return;
    std::string text = std::move(pf.held.front());
    pf.held.pop_front();
    pf.held_bytes -= text.size();
    relay_event(name, prompt_id, text);
  }
}

}  // namespace orch::gateway
