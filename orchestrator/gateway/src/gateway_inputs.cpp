// gateway_api's input files (gateway_api.hpp; docs/fleet.md, "Files across hosts"): the files
// in the gateway's input store that a prompt names go to its host before the prompt, each once per
// host's serve (by name and SHA-256), as serve's own upload (/upload/image).
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

// The largest input file sent to a host: serve's own upload cap (--max-upload's default), past
// which the host would refuse it anyway.
constexpr std::size_t max_input_file_bytes = std::size_t{64} << 20;
// The most input files one prompt sends: a prompt names far fewer; each costs a read and a hash.
constexpr std::size_t max_inputs_per_prompt = 1000;


bool strip_suffix(std::string& text, std::string_view suffix) {
  if (text.size() <= suffix.size() ||
      text.compare(text.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  text.resize(text.size() - suffix.size());
  return true;
}


struct input_file {
  std::string subfolder;  // '/'-separated, as the upload's subfolder field
  std::string name;
  std::string key;  // "<subfolder/name> <sha256>": what a host holds
  std::string path() const { return (subfolder.empty() ? "" : subfolder + "/") + name; }
};

// The bytes of the input file `subfolder`/`name` of the store, and its key. Read when the prompt
// is placed (for the key) and again when it is sent, never kept between: a prompt naming many
// large files holds one at a time. Errors: not_found (gone meanwhile), input_too_large.
result<std::pair<std::string, std::string>> read_input(const fs::path& root,
                                                       const std::string& subfolder,
                                                       const std::string& name) {
  auto components = serve::relative_components(subfolder);
  if (!components) return components.err();
  auto dir = serve::open_confined_directory(root, *components, false);
  if (!dir) return dir.err();
  auto file = serve::open_confined_file(dir->get(), name);
  if (!file) return file.err();
  auto bytes = serve::read_at_most(file->get(), max_input_file_bytes);
  const std::string path = (subfolder.empty() ? "" : subfolder + "/") + name;
  if (!bytes)
    return error{gateway_errc::input_too_large, "input file '" + path + "' holds more than " +
                                        std::to_string(max_input_file_bytes >> 20) +
                                        " MiB, the most a host takes as an upload"};
  std::string key = path + " " + support::sha256_hex(*bytes);
  return std::pair(std::move(*bytes), std::move(key));
}

// The input files a prompt names. The rule: a node's input whose value is a string (a link is
// an array) names an input file when, without ComfyUI's trailing " [input]", it is a relative
// path ("x.png", "sub/x.png") of a regular file in the gateway's input directory, reached
// without a symlink. A value annotated " [output]" or " [temp]" names another directory's file,
// which the host made itself; any other string names no file of the store and is left alone.
// Each file once, however many inputs name it. Errors: a file past max_input_file_bytes, or
// more than max_inputs_per_prompt files (the message says which).
result<std::vector<input_file>> input_files_of(const json& prompt, const fs::path& root) {
  std::vector<input_file> files;
  std::set<std::string> seen;
  for (const auto& [node_id, node] : prompt.items()) {
    if (!node.is_object()) continue;
    const auto inputs = node.find("inputs");
    if (inputs == node.end() || !inputs->is_object()) continue;
    for (const auto& [input, value] : inputs->items()) {
      if (!value.is_string()) continue;
      std::string text = value.get<std::string>();
      if (strip_suffix(text, " [output]") || strip_suffix(text, " [temp]")) continue;
      strip_suffix(text, " [input]");
      auto components = serve::relative_components(text);
      if (!components || components->empty()) continue;
      const std::string path = joined(*components);
      if (seen.contains(path)) continue;
      const std::string name = components->back();
      components->pop_back();
      auto dir = serve::open_confined_directory(root, *components, false);
      if (!dir) continue;
      if (!serve::open_confined_file(dir->get(), name)) continue;
      seen.insert(path);
      if (files.size() == max_inputs_per_prompt)
        return error{gateway_errc::too_many_inputs, "the prompt names more than " +
                                            std::to_string(max_inputs_per_prompt) + " input files"};
      auto read = read_input(root, joined(*components), name);
      if (!read)
        return error{read.err().code,
                     read.err().message + " (node " + node_id + ", input " + input + ")"};
      files.push_back({joined(*components), name, std::move(read->second)});
    }
  }
  return files;
}

// The body of an /upload/image that puts `f` in the host's input directory, replacing what is
// there. The boundary is random, so that no file's bytes can hold it on purpose.
std::pair<std::string, std::string> upload_body(const input_file& f, const std::string& bytes) {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string boundary = "orch-gateway-";  // and 32 hex digits: within RFC 2046's 70
  for (int i = 0; i < 32; ++i) boundary += hex[gen() & 15];
  std::string body;
  body.reserve(bytes.size() + 1024);
  body += "--" + boundary +
          "\r\nContent-Disposition: form-data; name=\"image\"; filename*=UTF-8''" +
          percent_encoded(f.name) + "\r\nContent-Type: application/octet-stream\r\n\r\n";
  body += bytes;
  body += "\r\n";
  const std::pair<std::string, std::string> fields[] = {
      {"subfolder", f.subfolder}, {"type", "input"}, {"overwrite", "true"}};
  for (const auto& [field, value] : fields)
    body += "--" + boundary + "\r\nContent-Disposition: form-data; name=\"" + field + "\"\r\n\r\n" +
            value + "\r\n";
  body += "--" + boundary + "--\r\n";
  return {"multipart/form-data; boundary=" + boundary, std::move(body)};
}

}  // namespace

struct gateway_api::input_send {
  std::string prompt_id;
  std::string host;
  std::uint64_t generation = 0;  // the host's serve_generation when the sending began
  bool again = false;            // send_to_host's: a prompt in doubt sent a second time
  int tries_left = 2;
  std::vector<input_file> files;
  std::size_t next = 0;
};


void gateway_api::send_inputs(const std::string& prompt_id, const std::string& name, bool again,
                              int tries_left) {
  const running_prompt* r = queue_.running(prompt_id);
  if (r == nullptr) return;
  auto files = input_files_of(r->prompt.document, options_.files.input);
  if (!files) {
    fail_running(
        prompt_id, "comfy_orch.InputNotSent",
        "the prompt's input files could not be sent to host " + name + ": " + files.err().message);
    schedule();
    return;
  }
  host& h = hosts_.at(name);
  auto send = std::make_shared<input_send>();
  send->prompt_id = prompt_id;
  send->host = name;
  send->generation = h.serve_generation;
  send->again = again;
  send->tries_left = tries_left;
  for (auto& f : *files)
    if (!h.inputs_held.contains(f.key)) send->files.push_back(std::move(f));
  send_next_input(std::move(send));
}

void gateway_api::send_next_input(std::shared_ptr<input_send> send) {
  const running_prompt* r = queue_.running(send->prompt_id);
  if (stopped_ || r == nullptr || r->host != send->host) return;  // gone back, or ended
  if (send->next == send->files.size()) {
    send_to_host(send->prompt_id, send->host, send->again, send->tries_left);
    return;
  }
  input_file& f = send->files[send->next];
  auto read = read_input(options_.files.input, f.subfolder, f.name);
  if (!read) {
    fail_running(send->prompt_id, "comfy_orch.InputNotSent",
                 "input file '" + f.path() + "' could not be sent to host " + send->host + ": " +
                     read.err().message);
    schedule();
    return;
  }
  f.key = std::move(read->second);  // its bytes now, should it have been uploaded again since
  auto [content_type, body] = upload_body(f, read->first);
  hosts_.at(send->host)
      .link->request(
          "POST", "/upload/image", std::move(body),
          [this, send](result<host_answer> a) {
            const running_prompt* now = queue_.running(send->prompt_id);
            if (stopped_ || now == nullptr || now->host != send->host) return;
            host& h = hosts_.at(send->host);
            const input_file& sent = send->files[send->next];
            const std::string path = sent.path();
            if (!a) {
              // Never reached the host: nothing of the prompt ran there.
              host_lost(send->host, a.err().message);
              return;
            }
            if (a->status != 200) {
              fail_running(send->prompt_id, "comfy_orch.InputNotSent",
                           "host " + send->host + " (" + h.url + ") refused input file '" + path +
                               "' (HTTP " + std::to_string(a->status) +
                               "): " + a->body.substr(0, 2000));
              schedule();
              return;
            }
            if (h.serve_generation == send->generation) {
              h.inputs_held.insert(sent.key);
              ++h.inputs_sent;
            }
            ++send->next;
            send_next_input(send);
          },
          std::chrono::seconds(60), max_host_answer_bytes, std::move(content_type));
}

}  // namespace orch::gateway
