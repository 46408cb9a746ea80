// The gateway's files (docs/fleet.md, "Files across hosts"), over three real serve hosts, each
// with input and output directories of its own (as machines have): an upload at the gateway
// goes to each host that runs a prompt naming it, once per host and content; an output a host
// saves is copied to the gateway, whose /view gives its bytes after that host is killed; and a
// host whose history names a file outside the gateway's directories, a file past the cap, or
// too many files, ends its prompt with an error naming it, and the gateway writes nothing
// outside its directories. The test pack's TestLoadInput and TestSaveOutput stand for
// ComfyUI's LoadImage and SaveImage.
#include <cstdlib>

#include "../cli/command_runner.hpp"
#include "gateway_fixture.hpp"

namespace orch::serve_testing {
namespace {

using orch::testing::slurp;

class gateway_files : public gateway_test {
 protected:
  fs::path host_files(std::size_t index) const { return dir_ / ("host-" + std::to_string(index)); }
  // Host `index` with its own input/ and output/ (not part of the fingerprint: the fleet takes
  // them), which the test pack's nodes find through ORCH_TEST_HOST_FILES, passed down from the
  // host's environment to its workers.
  std::unique_ptr<serve_process> start_host(std::size_t index) override {
    const fs::path files = host_files(index);
    fs::create_directories(files / "input");
    fs::create_directories(files / "output");
    ::setenv("ORCH_TEST_HOST_FILES", files.c_str(), 1);
    orch::runtime_testing::deployment_options o;
    o.server = "input_directory = \"" + (files / "input").string() + "\"\noutput_directory = \"" +
               (files / "output").string() + "\"\n";
    auto h = host(o);
    ::unsetenv("ORCH_TEST_HOST_FILES");
    return h;
  }
  std::size_t index_of(const std::string& host) const {
    return static_cast<std::size_t>(std::stoi(host.substr(host.find('-') + 1)));
  }
  std::map<std::string, std::uint64_t> inputs_sent() const {
    std::map<std::string, std::uint64_t> sent;
    const json fleet_doc = gateway_->get("/orch/fleet").json();
    for (const auto& h : fleet_doc["hosts"])
      sent[h["name"]] = h["inputs_sent"].get<std::uint64_t>();
    return sent;
  }
  static json load_prompt(const std::string& image) {
    return {{"1", {{"class_type", "TestLoadInput"}, {"inputs", {{"image", image}}}}}};
  }
};

std::string bytes_of(unsigned seed, std::size_t size) {
  std::string b(size, '\0');
  for (std::size_t i = 0; i < size; ++i) b[i] = static_cast<char>((i * 31 + seed * 7) % 251);
  return b;
}

TEST_F(gateway_files, an_upload_goes_to_each_host_that_runs_a_prompt_naming_it_once) {
  const std::string picture = bytes_of(1, 5000);
  const auto uploaded = upload(*gateway_, "in.png", picture);
  ASSERT_EQ(uploaded.status, 200u) << uploaded.body;
  EXPECT_EQ(uploaded.json(), (json{{"name", "in.png"}, {"subfolder", ""}, {"type", "input"}}));
  // ComfyUI's /view of an input file, from the gateway's own store.
  const auto viewed = gateway_->get("/view?filename=in.png&type=input");
  ASSERT_EQ(viewed.status, 200u);
  EXPECT_TRUE(viewed.body == picture);  // bytes: not printed when they differ

  // Four prompts at once over three free hosts: the first three go to three hosts, the fourth
  // to one of them after; each names the upload, two of them as ComfyUI's " [input]" form.
  std::vector<std::string> ids;
  for (const char* name : {"in.png", "in.png [input]", "in.png", "in.png [input]"})
    ids.push_back(queue_at_gateway(load_prompt(name), "f"));
  std::map<std::string, int> prompts_on;
  for (const auto& id : ids) {
    const json entry = finished_at_gateway(id);
    ASSERT_FALSE(entry.is_null()) << id;
    // The node read the file on its host: it was there before the prompt ran.
    EXPECT_EQ(entry["status"]["status_str"], "success") << entry.dump();
    ++prompts_on[host_of(id)];
  }
  EXPECT_EQ(prompts_on.size(), 3u) << "every host ran one of them";
  const auto sent = inputs_sent();
  for (const auto& [host, count] : prompts_on) {
    EXPECT_EQ(sent.at(host), 1u) << host << " ran " << count << " prompts naming it";
    EXPECT_TRUE(slurp(host_files(index_of(host)) / "input" / "in.png") == picture) << host;
  }

  // Other bytes under the same name: sent again, to the host that runs the next prompt only.
  const std::string repainted = bytes_of(2, 7000);
  ASSERT_EQ(upload(*gateway_, "in.png", repainted, {{"overwrite", "true"}}).status, 200u);
  const std::string again = queue_at_gateway(load_prompt("in.png"), "f");
  EXPECT_EQ(finished_at_gateway(again)["status"]["status_str"], "success");
  const std::string host = host_of(again);
  EXPECT_EQ(inputs_sent().at(host), 2u);
  EXPECT_TRUE(slurp(host_files(index_of(host)) / "input" / "in.png") == repainted) << host;
  // A string that names no file of the store is no input: nothing is sent for it.
  const std::string missing = queue_at_gateway(load_prompt("absent.png"), "f");
  const json failed = finished_at_gateway(missing);
  EXPECT_EQ(failed["status"]["status_str"], "error") << failed.dump();
  std::uint64_t total = 0;
  for (const auto& [_, count] : inputs_sent()) total += count;
  EXPECT_EQ(total, 4u);
}

TEST_F(gateway_files, an_output_is_copied_to_the_gateway_and_outlives_its_host) {
  const json prompt = {
      {"1",
       {{"class_type", "TestSaveOutput"},
        {"inputs", {{"filename_prefix", "saved"}, {"bytes", 300000}, {"seed", 7}}}}}};
  const std::string id = queue_at_gateway(prompt, "o");
  const json entry = finished_at_gateway(id);
  ASSERT_EQ(entry["status"]["status_str"], "success") << entry.dump();
  EXPECT_EQ(entry["outputs"]["1"]["images"],
            (json::array({{{"filename", "saved_7.png"}, {"subfolder", ""}, {"type", "output"}}})));
  const std::string host = host_of(id);
  const std::size_t index = index_of(host);
  const fs::path on_host = host_files(index) / "output" / "saved_7.png";
  const std::string made = slurp(on_host);
  ASSERT_EQ(made.size(), 300000u);
  const auto viewed = gateway_->get("/view?filename=saved_7.png&subfolder=&type=output");
  ASSERT_EQ(viewed.status, 200u) << viewed.body;
  EXPECT_TRUE(viewed.body == made) << viewed.body.size() << " bytes";

  // The host killed, and its file gone with its disk: the gateway still gives it.
  ::kill(hosts_[index]->pid(), SIGKILL);
  hosts_[index].reset();
  fs::remove(on_host);
  ASSERT_TRUE(wait_until([&] { return !up_hosts().contains(host); }));
  const auto after = gateway_->get("/api/view?filename=saved_7.png&type=output");
  ASSERT_EQ(after.status, 200u) << after.body;
  EXPECT_TRUE(after.body == made) << after.body.size() << " bytes";
  EXPECT_EQ(gateway_history_of(id)["outputs"], entry["outputs"]);
}

// Hosts number their outputs from their own directories, so two name different images alike:
// at the gateway the second is stored under ComfyUI's next free name, which its entry names.
TEST_F(gateway_files, outputs_of_one_name_with_other_bytes_are_each_kept) {
  const auto save = [](int bytes) {
    return json{{"1",
                 {{"class_type", "TestSaveOutput"},
                  {"inputs", {{"filename_prefix", "dup"}, {"bytes", bytes}, {"seed", 1}}}}}};
  };
  const std::string first = queue_at_gateway(save(1000), "d");
  const json first_entry = finished_at_gateway(first);
  const std::string second = queue_at_gateway(save(2000), "d");
  const json second_entry = finished_at_gateway(second);
  ASSERT_EQ(first_entry["status"]["status_str"], "success") << first_entry.dump();
  ASSERT_EQ(second_entry["status"]["status_str"], "success") << second_entry.dump();
  EXPECT_EQ(first_entry["outputs"]["1"]["images"][0]["filename"], "dup_1.png");
  EXPECT_EQ(second_entry["outputs"]["1"]["images"][0]["filename"], "dup_1 (1).png");
  EXPECT_EQ(gateway_->get("/view?filename=dup_1.png").body.size(), 1000u);
  EXPECT_EQ(gateway_->get("/view?filename=dup_1%20(1).png").body.size(), 2000u);
  // The same bytes again: kept once, under the name they have.
  const std::string third = queue_at_gateway(save(1000), "d");
  EXPECT_EQ(finished_at_gateway(third)["outputs"]["1"]["images"][0]["filename"], "dup_1.png");
}

// A client reads a node's images as soon as its `executed` event names them, while the prompt
// still runs (here, a 3 s sleep after the save): the event reaches it once the file is at the
// gateway.
TEST_F(gateway_files, an_output_is_at_the_gateway_when_its_executed_event_arrives) {
  ws_client client(gateway_->port(), "e");
  const json prompt = {
      {"1",
       {{"class_type", "TestSaveOutput"},
        {"inputs", {{"filename_prefix", "live"}, {"bytes", 3000}, {"seed", 3}}}}},
      {"2", {{"class_type", "TestSleep"}, {"inputs", {{"ms", json::array({"1", 0})}}}}}};
  const std::string id = queue_at_gateway(prompt, "e");
  json executed;
  while (executed.is_null()) {
    auto m = client.next();
    ASSERT_TRUE(m.has_value()) << "no executed event for the save";
    if ((*m)["type"] == "executed" && (*m)["data"]["prompt_id"] == id &&
        (*m)["data"]["node"] == "1")
      executed = (*m)["data"];
  }
  ASSERT_EQ(executed["output"]["images"][0]["filename"], "live_3.png") << executed.dump();
  const auto viewed = gateway_->get("/view?filename=live_3.png&type=output");
  ASSERT_EQ(viewed.status, 200u) << viewed.body;
  EXPECT_TRUE(gateway_history_of(id).is_null()) << "the prompt still sleeps";
  const std::string host = host_of(id);
  EXPECT_TRUE(viewed.body == slurp(host_files(index_of(host)) / "output" / "live_3.png"));
  const json entry = finished_at_gateway(id);
  EXPECT_EQ(entry["status"]["status_str"], "success") << entry.dump();
  EXPECT_EQ(entry["outputs"]["1"]["images"][0]["filename"], "live_3.png");
}

// A host is untrusted (hostile_host.py): its history entry names a file that would leave the
// gateway's output directory, a file past [gateway] max_output_file, and more files than
// max_outputs_per_prompt. Each prompt ends with an error naming the host and why; nothing is
// written outside the gateway's directories, nor left half-written inside them.
TEST_F(gateway_files, a_hostile_hosts_outputs_stay_inside_the_gateways_directories) {
  const fs::path port_file = dir_ / "hostile.port";
  const auto started = orch::testing::run_command(
      "/usr/bin/python3 '" + std::string(ORCH_TEST_HOSTILE_HOST) + "' '" + port_file.string() +
      "' > '" + (dir_ / "hostile.log").string() + "' 2>&1 & echo $!");
  ASSERT_EQ(started.exit_code, 0) << started.err;
  const pid_t hostile = static_cast<pid_t>(std::stol(started.out));
  ASSERT_TRUE(wait_until([&] { return fs::exists(port_file); }));
  std::ifstream in(port_file);
  std::string port;
  in >> port;
  const fs::path store = dir_ / "store";
  start_gateway(
      "[gateway]\nsecret_file = \"fleet.secret\"\noutput_directory = \"store/output\"\n"
      "input_directory = \"store/input\"\ntemp_directory = \"store/temp\"\n"
      "max_output_file = \"1MiB\"\nmax_outputs_per_prompt = 3\n\n[[host]]\nurl = "
      "\"http://127.0.0.1:" +
      port + "\"\n");
  ASSERT_TRUE(wait_until([&] { return up_hosts().size() == 1; }));
  const auto run = [&](int kind) {
    const std::string id =
        queue_at_gateway({{"1", {{"class_type", "TestSleep"}, {"inputs", {{"ms", kind}}}}}}, "h");
    return std::pair(id, finished_at_gateway(id));
  };
  const auto [escaping, escaped_entry] = run(2);
  const auto [huge, huge_entry] = run(3);
  const auto [many, many_entry] = run(4);
  for (const auto& [entry, why] :
       {std::pair(escaped_entry, "its output file '../../escaped-" + escaping +
                                     "' (node 1) leaves the output directory"),
        std::pair(huge_entry, std::string("its output file 'huge.png' could not be copied to the "
                                          "gateway")),
        std::pair(many_entry, std::string("names more than 3 output files"))}) {
    ASSERT_FALSE(entry.is_null());
    EXPECT_EQ(entry["status"]["status_str"], "error") << entry.dump();
    const std::string text = entry.dump();
    EXPECT_NE(text.find("host host-0"), std::string::npos) << text;
    EXPECT_NE(text.find(why), std::string::npos) << text;
    EXPECT_EQ(entry["outputs"], json::object()) << "an entry names no file the gateway lacks";
  }
  EXPECT_NE(huge_entry.dump().find("1048576"), std::string::npos) << huge_entry.dump();
  EXPECT_FALSE(fs::exists(dir_.parent_path() / ("escaped-" + escaping)));
  EXPECT_FALSE(fs::exists(dir_ / ("escaped-" + escaping)));
  EXPECT_FALSE(fs::exists(store / ("escaped-" + escaping)));
  // Nothing half-written is left in the store (the huge file's temporary is gone).
  std::vector<std::string> left;
  for (const auto& e : fs::recursive_directory_iterator(store))
    if (e.is_regular_file()) left.push_back(e.path().string());
  EXPECT_TRUE(left.empty()) << left.front();
  EXPECT_EQ(gateway_->get("/queue").status, 200u) << "the gateway still answers";
  ::kill(hostile, SIGKILL);
}

}  // namespace
}  // namespace orch::serve_testing
