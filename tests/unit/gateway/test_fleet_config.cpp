// The fleet file (fleet_config.hpp): what it reads, and that every problem names the file, the
// line and the key, and says what to do.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "orch/gateway/fleet_config.hpp"
#include "orch/gateway/gateway_server.hpp"
#include "orch/gateway/host_source.hpp"

namespace orch::gateway {
namespace {

struct loaded {
  std::optional<fleet_config> config;
  manifests::diagnostics diags;
};

loaded parse(const std::string& text) {
  loaded l;
  l.config = parse_fleet_config(text, "/fleets/fleet.toml", l.diags);
  return l;
}

// The only error of `l`, which must have failed.
manifests::diagnostic only_error(const loaded& l) {
  EXPECT_FALSE(l.config.has_value());
  EXPECT_EQ(l.diags.count(manifests::severity::error), 1u);
  for (const auto& d : l.diags.items())
    if (d.level == manifests::severity::error) return d;
  return {};
}

TEST(fleet_config, static_hosts_are_read_with_the_gateway_defaults) {
  const auto l = parse(
      "[[host]]\nurl = \"http://127.0.0.1:8190\"\n\n[[host]]\nurl = \"http://10.0.0.2:8188/\"\n");
  ASSERT_TRUE(l.config.has_value());
  EXPECT_EQ(l.config->listen, "127.0.0.1");
  EXPECT_EQ(l.config->port, 8188);
  EXPECT_EQ(l.config->history_size, 10000u);
  EXPECT_FALSE(l.config->secret_file.has_value());
  ASSERT_EQ(l.config->hosts.size(), 2u);
  EXPECT_EQ(l.config->hosts[0].host, "127.0.0.1");
  EXPECT_EQ(l.config->hosts[0].port, 8190);
  EXPECT_EQ(l.config->hosts[1].host, "10.0.0.2");
  EXPECT_EQ(l.config->hosts[1].port, 8188);
  EXPECT_FALSE(l.config->ray.has_value());
}

TEST(fleet_config, gateway_keys_are_read_and_paths_are_relative_to_the_file) {
  const auto l = parse(
      "[gateway]\nlisten = \"0.0.0.0\"\nport = 9000\nsecret_file = \"fleet.secret\"\n"
      "history_size = 50\n\n[[host]]\nurl = \"http://127.0.0.1:8190\"\n");
  ASSERT_TRUE(l.config.has_value());
  EXPECT_EQ(l.config->listen, "0.0.0.0");
  EXPECT_EQ(l.config->port, 9000);
  EXPECT_EQ(l.config->history_size, 50u);
  EXPECT_EQ(*l.config->secret_file, std::filesystem::path("/fleets/fleet.secret"));
}

TEST(fleet_config, the_state_file_is_beside_the_fleet_file_unless_named) {
  const auto l = parse("[[host]]\nurl = \"http://a:1\"\n");
  ASSERT_TRUE(l.config.has_value());
  EXPECT_EQ(l.config->state_file, std::filesystem::path("/fleets/fleet.gateway-state.sqlite"));
  const auto named =
      parse("[gateway]\nstate_file = \"state/g.sqlite\"\n[[host]]\nurl = \"http://a:1\"\n");
  ASSERT_TRUE(named.config.has_value());
  EXPECT_EQ(named.config->state_file, std::filesystem::path("/fleets/state/g.sqlite"));
  const auto d = only_error(parse("[gateway]\nstate_file = 3\n[[host]]\nurl = \"http://a:1\"\n"));
  EXPECT_EQ(d.key, "gateway.state_file");
  EXPECT_EQ(d.where.line, 2u);
  const auto dir =
      only_error(parse("[gateway]\nstate_file = \"state/\"\n[[host]]\nurl = \"http://a:1\"\n"));
  EXPECT_EQ(dir.key, "gateway.state_file");
  EXPECT_NE(dir.message.find("directory"), std::string::npos) << dir.message;
}

TEST(fleet_config, the_user_directory_is_user_beside_the_file_unless_named) {
  const auto defaulted = parse("[[host]]\nurl = \"http://a:1\"\n");
  ASSERT_TRUE(defaulted.config.has_value());
  EXPECT_EQ(defaulted.config->user_directory, std::filesystem::path("/fleets/user"));
  const auto named =
      parse("[gateway]\nuser_directory = \"frontend-users\"\n[[host]]\nurl = \"http://a:1\"\n");
  ASSERT_TRUE(named.config.has_value());
  EXPECT_EQ(named.config->user_directory, std::filesystem::path("/fleets/frontend-users"));
  const auto d = only_error(parse("[gateway]\nport = 1\nuser_directory = 3\n[[host]]\nurl = \"http://a:1\"\n"));
  EXPECT_EQ(d.key, "gateway.user_directory");
  EXPECT_EQ(d.where.line, 3u);
  EXPECT_NE(d.fix.find("user_directory"), std::string::npos) << d.fix;
}

TEST(fleet_config, a_pinned_fingerprint_is_read_and_one_that_is_none_is_refused) {
  const std::string fp = "sha256:" + std::string(64, 'a');
  const auto l = parse("[gateway]\nfingerprint = \"" + fp + "\"\n[[host]]\nurl = \"http://a:1\"\n");
  ASSERT_TRUE(l.config.has_value());
  EXPECT_EQ(l.config->fingerprint, fp);
  const auto d = only_error(
      parse("[gateway]\nfingerprint = \"sha256:ABC\"\n[[host]]\nurl = \"http://a:1\"\n"));
  EXPECT_EQ(d.key, "gateway.fingerprint");
  EXPECT_EQ(d.where.line, 2u);
  EXPECT_NE(d.fix.find("/orch/fleet/host"), std::string::npos) << d.fix;
}

TEST(fleet_config, placement_and_its_window_are_read_and_an_unknown_placement_is_refused) {
  const auto defaults = parse("[[host]]\nurl = \"http://a:1\"\n");
  ASSERT_TRUE(defaults.config.has_value());
  EXPECT_FALSE(defaults.config->round_robin);
  EXPECT_EQ(defaults.config->pressure_window_ms, 1500u);
  const auto l = parse(
      "[gateway]\nplacement = \"round_robin\"\npressure_window_ms = 0\n[[host]]\nurl = "
      "\"http://a:1\"\n");
  ASSERT_TRUE(l.config.has_value());
  EXPECT_TRUE(l.config->round_robin);
  EXPECT_EQ(l.config->pressure_window_ms, 0u);
  const auto d =
      only_error(parse("[gateway]\nplacement = \"fastest\"\n[[host]]\nurl = \"http://a:1\"\n"));
  EXPECT_EQ(d.key, "gateway.placement");
  EXPECT_EQ(d.where.line, 2u);
  EXPECT_NE(d.fix.find("round_robin"), std::string::npos) << d.fix;
}

TEST(fleet_config, ray_is_read_with_its_defaults) {
  const auto l = parse(
      "[gateway]\nsecret_file = \"s\"\n[ray]\naddress = \"127.0.0.1:6379\"\n"
      "python = \".deps/ray/bin/python\"\nhosts = 3\ndeployment = \"deployment.toml\"\n");
  ASSERT_TRUE(l.config.has_value());
  ASSERT_TRUE(l.config->ray.has_value());
  EXPECT_EQ(l.config->ray->address, "127.0.0.1:6379");
  EXPECT_EQ(l.config->ray->python, std::filesystem::path("/fleets/.deps/ray/bin/python"));
  EXPECT_EQ(l.config->ray->hosts, 3u);
  EXPECT_EQ(l.config->ray->resource, "comfy_orch_host");
  EXPECT_EQ(l.config->ray->deployment, std::filesystem::path("/fleets/deployment.toml"));
  EXPECT_FALSE(l.config->ray->comfy_orch.empty());  // this executable
  EXPECT_EQ(l.config->ray->gpus_per_host, 0u);
}

TEST(fleet_config, gpus_per_host_reaches_the_drivers_command_line) {
  const std::string ray =
      "[gateway]\nsecret_file = \"s\"\n[ray]\naddress = \"127.0.0.1:6379\"\n"
      "python = \"p\"\ndeployment = \"d.toml\"\n";
  const auto plain = parse(ray);
  ASSERT_TRUE(plain.config.has_value());
  const auto without = ray_host_source(*plain.config->ray, std::nullopt).command();
  EXPECT_EQ(std::find(without.begin(), without.end(), "--gpus-per-host"), without.end());
  const auto l = parse(ray + "gpus_per_host = 1\n");
  ASSERT_TRUE(l.config.has_value());
  EXPECT_EQ(l.config->ray->gpus_per_host, 1u);
  const auto args = ray_host_source(*l.config->ray, std::nullopt).command();
  const auto flag = std::find(args.begin(), args.end(), "--gpus-per-host");
  ASSERT_NE(flag, args.end());
  ASSERT_NE(flag + 1, args.end());
  EXPECT_EQ(*(flag + 1), "1");
  const auto d = only_error(parse(ray + "gpus_per_host = -1\n"));
  EXPECT_EQ(d.key, "ray.gpus_per_host");
}

TEST(fleet_config, a_fleet_ray_starts_needs_the_secret) {
  const auto d =
      only_error(parse("[ray]\naddress = \"a:1\"\npython = \"p\"\ndeployment = \"d.toml\"\n"));
  EXPECT_EQ(d.key, "gateway.secret_file");
  EXPECT_EQ(d.where.line, 1u);
  EXPECT_NE(d.fix.find("secret_file"), std::string::npos) << d.fix;
}

TEST(fleet_config, a_file_without_hosts_is_refused_saying_how_to_name_them) {
  const auto d = only_error(parse("[gateway]\nport = 8188\n"));
  EXPECT_EQ(d.where.file, "/fleets/fleet.toml");
  EXPECT_EQ(d.where.line, 1u);
  EXPECT_EQ(d.key, "ray");
  EXPECT_NE(d.fix.find("[[host]]"), std::string::npos) << d.fix;
}

TEST(fleet_config, ray_and_a_host_list_together_are_refused) {
  const auto d = only_error(
      parse("[ray]\naddress = \"a:1\"\npython = \"p\"\ndeployment = \"d.toml\"\n\n[[host]]\n"
            "url = \"http://127.0.0.1:8190\"\n"));
  EXPECT_EQ(d.key, "host");
  EXPECT_EQ(d.where.line, 6u);
  EXPECT_NE(d.message.find("both"), std::string::npos) << d.message;
}

TEST(fleet_config, a_host_url_that_is_no_http_address_names_its_line_and_key) {
  const auto d = only_error(
      parse("[[host]]\nurl = \"http://127.0.0.1:8190\"\n\n[[host]]\nurl = \"https://b:1/x\"\n"));
  EXPECT_EQ(d.where.file, "/fleets/fleet.toml");
  EXPECT_EQ(d.where.line, 5u);
  EXPECT_EQ(d.key, "host[1].url");
  EXPECT_NE(d.fix.find("http://HOST:PORT"), std::string::npos) << d.fix;
}

TEST(fleet_config, a_host_named_twice_is_refused) {
  const auto d =
      only_error(parse("[[host]]\nurl = \"http://a:1\"\n[[host]]\nurl = \"http://a:1/\"\n"));
  EXPECT_EQ(d.key, "host[1].url");
  EXPECT_EQ(d.where.line, 4u);
}

TEST(fleet_config, a_missing_url_names_the_host) {
  const auto l = parse("[[host]]\nurl = \"http://a:1\"\n[[host]]\n");
  const auto d = only_error(l);
  EXPECT_EQ(d.key, "host[1].url");
  EXPECT_EQ(d.where.line, 3u);
}

TEST(fleet_config, a_wrong_type_names_the_key_and_what_it_should_be) {
  const auto d = only_error(parse("[gateway]\nport = \"8188\"\n[[host]]\nurl = \"http://a:1\"\n"));
  EXPECT_EQ(d.key, "gateway.port");
  EXPECT_EQ(d.where.line, 2u);
  EXPECT_NE(d.message.find("integer"), std::string::npos) << d.message;
}

TEST(fleet_config, a_port_out_of_range_is_refused) {
  const auto d = only_error(parse("[gateway]\nport = 70000\n[[host]]\nurl = \"http://a:1\"\n"));
  EXPECT_EQ(d.key, "gateway.port");
  EXPECT_EQ(d.where.line, 2u);
}

// The file store (docs/fleet.md, "Files across hosts"): beside the fleet file unless told, as a
// deployment's input/ and output/ are; the caps on what a host's outputs may be.
TEST(fleet_config, the_file_store_and_its_caps_are_read_with_their_defaults) {
  const auto defaults = parse("[[host]]\nurl = \"http://a:1\"\n");
  ASSERT_TRUE(defaults.config.has_value());
  EXPECT_EQ(defaults.config->input_directory, std::filesystem::path("/fleets/input"));
  EXPECT_EQ(defaults.config->output_directory, std::filesystem::path("/fleets/output"));
  EXPECT_EQ(defaults.config->temp_directory, std::filesystem::path("/fleets/temp"));
  EXPECT_EQ(defaults.config->max_output_file_bytes, std::uint64_t{4} << 30);
  EXPECT_EQ(defaults.config->max_outputs_per_prompt, 10000u);
  const auto l = parse(
      "[gateway]\ninput_directory = \"in\"\noutput_directory = \"/data/out\"\n"
      "temp_directory = \"../tmp\"\nmax_output_file = \"512MiB\"\nmax_outputs_per_prompt = 7\n"
      "[[host]]\nurl = \"http://a:1\"\n");
  ASSERT_TRUE(l.config.has_value());
  EXPECT_EQ(l.config->input_directory, std::filesystem::path("/fleets/in"));
  EXPECT_EQ(l.config->output_directory, std::filesystem::path("/data/out"));
  EXPECT_EQ(l.config->temp_directory, std::filesystem::path("/tmp"));
  EXPECT_EQ(l.config->max_output_file_bytes, std::uint64_t{512} << 20);
  EXPECT_EQ(l.config->max_outputs_per_prompt, 7u);
  const auto d = only_error(
      parse("[gateway]\nport = 1\nmax_output_file = \"lots\"\n[[host]]\nurl = \"http://a:1\"\n"));
  EXPECT_EQ(d.key, "gateway.max_output_file");
  EXPECT_EQ(d.where.line, 3u);
  EXPECT_NE(d.fix.find("4GiB"), std::string::npos) << d.fix;
  EXPECT_EQ(only_error(parse("[gateway]\nmax_outputs_per_prompt = 0\n[[host]]\nurl = \"http://a:1\"\n"))
                .key,
            "gateway.max_outputs_per_prompt");
}

TEST(fleet_config, an_unknown_key_names_the_keys_it_could_be) {
  const auto d = only_error(parse("[gateway]\nprot = 1\n[[host]]\nurl = \"http://a:1\"\n"));
  EXPECT_EQ(d.key, "gateway.prot");
  EXPECT_EQ(d.where.line, 2u);
  EXPECT_NE(d.fix.find("port"), std::string::npos) << d.fix;
}

TEST(fleet_config, an_unknown_table_is_refused) {
  const auto d = only_error(parse("[hosts]\nurl = 1\n[[host]]\nurl = \"http://a:1\"\n"));
  EXPECT_EQ(d.key, "hosts");
  EXPECT_EQ(d.where.line, 1u);
}

TEST(fleet_config, ray_without_its_address_python_and_deployment_names_each) {
  const auto l = parse("[gateway]\nsecret_file = \"s\"\n[ray]\nhosts = 2\n");
  ASSERT_FALSE(l.config.has_value());
  std::set<std::string> keys;
  for (const auto& d : l.diags.items()) {
    EXPECT_EQ(d.where.file, "/fleets/fleet.toml");
    EXPECT_EQ(d.where.line, 3u) << d.format();
    EXPECT_FALSE(d.fix.empty()) << d.format();
    keys.insert(d.key);
  }
  EXPECT_EQ(keys, (std::set<std::string>{"ray.address", "ray.python", "ray.deployment"}));
}

TEST(fleet_config, a_syntax_error_names_its_line) {
  const auto l = parse("[[host]]\nurl = \"http://a:1\n");
  ASSERT_FALSE(l.config.has_value());
  ASSERT_FALSE(l.diags.items().empty());
  EXPECT_EQ(l.diags.items()[0].where.file, "/fleets/fleet.toml");
  EXPECT_EQ(l.diags.items()[0].where.line, 2u);
}

// The gateway reads its secret with the hosts' own checks (serve::fleet_secret::read): a file
// others may read, or a secret a header cannot carry, is refused naming the fleet file and the
// secret's; a good one loses one trailing newline, as serve reads it.
TEST(fleet_config, the_gateway_reads_its_secret_with_the_hosts_checks) {
  char dir[] = "/tmp/orch-fleet-secret-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::filesystem::path secret = std::filesystem::path(dir) / "fleet.secret";
  const auto prepared = [&](const std::string& content, std::filesystem::perms mode) {
    { std::ofstream(secret) << content; }
    std::filesystem::permissions(secret, mode);
    manifests::diagnostics diags;
    auto config =
        parse_fleet_config("[gateway]\nsecret_file = \"" + secret.string() + "\"\nstate_file = \"" +
                               dir + "/state.sqlite\"\n[[host]]\nurl = \"http://127.0.0.1:1\"\n",
                           "/fleets/fleet.toml", diags);
    EXPECT_TRUE(config.has_value()) << diags.items().size();
    return gateway_server::prepare(std::move(*config), {});
  };
  const std::string good(40, 'k');
  const auto owner = std::filesystem::perms::owner_read | std::filesystem::perms::owner_write;
  EXPECT_TRUE(prepared(good + "\n", owner));
  const auto world = prepared(good, owner | std::filesystem::perms::others_read);
  ASSERT_FALSE(world);
  EXPECT_NE(world.err().message.find("/fleets/fleet.toml: [gateway] secret_file"),
            std::string::npos)
      << world.err().message;
  EXPECT_NE(world.err().message.find("chmod 600"), std::string::npos) << world.err().message;
  const auto injected = prepared(good + "\r\nX-Injected: 1", owner);
  ASSERT_FALSE(injected);
  EXPECT_NE(injected.err().message.find("a byte an HTTP header cannot carry"), std::string::npos)
      << injected.err().message;
  EXPECT_FALSE(prepared("short", owner));
  std::filesystem::remove_all(dir);
}

// A user directory the gateway cannot make stops it at start, naming the key.
TEST(fleet_config, a_user_directory_that_cannot_be_made_stops_the_gateway_naming_it) {
  char dir[] = "/tmp/orch-fleet-users-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::filesystem::path file = std::filesystem::path(dir) / "a-file";
  { std::ofstream(file) << "not a directory\n"; }
  manifests::diagnostics diags;
  auto config = parse_fleet_config("[gateway]\nuser_directory = \"a-file/users\"\n[[host]]\n"
                                   "url = \"http://127.0.0.1:1\"\n",
                                   std::filesystem::path(dir) / "fleet.toml", diags);
  ASSERT_TRUE(config.has_value());
  auto server = gateway_server::prepare(std::move(*config), {});
  ASSERT_TRUE(server);
  const auto started = (*server)->start();
  ASSERT_FALSE(started);
  EXPECT_NE(started.err().message.find("fleet.toml: [gateway] user_directory"), std::string::npos)
      << started.err().message;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace orch::gateway
