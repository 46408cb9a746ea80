// The pinned budget against hostile workers and other hosts (docs/shared-memory.md):
//  - a hostile native pack tries every write a worker can make besides its own slot, then lies
//    in its own slot; the host, the other workers and the memory table are unharmed, and the
//    liar is clamped to its grant and flagged;
//  - three hosts at once share one machine ledger: their reservations never sum past the one
//    budget, and the host that does not fit is refused, naming the others.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "orch/ipc/cgroup_probe.hpp"
#include "orch/ipc/machine_ledger.hpp"
#include "orch/ipc/pinned_budget.hpp"
#include "orch/runtime/memory_table.hpp"
#include "runtime_fixture.hpp"

extern char** environ;

namespace orch::runtime_testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class budget_faults : public runtime_test {
 protected:
  // The usual deployment plus a fourth pack whose worker is hostile.
  void start_with_hostile_pack() {
    const fs::path file = write_deployment();
    write(dir_ / "packs/Hostile/nodes/comfy-env.toml",
          "[worker]\nlibrary = \"liborch_pack_hostile_budget.so\"\n");
    std::ifstream in(file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string last = "\"packs/ComfyUI-TestNodes\"]";
    const auto at = text.find(last);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, last.size(), "\"packs/ComfyUI-TestNodes\", \"packs/Hostile\"]");
    write(file, text);
    ASSERT_NO_FATAL_FAILURE(start_file(file));
  }

  executor::prompt_outcome run_node(const std::string& class_type, const json& inputs) {
    return run(json{{"1", {{"class_type", class_type}, {"inputs", inputs}}}}.dump());
  }
};

TEST_F(budget_faults, a_hostile_pack_writes_only_its_own_slot_and_its_lie_is_clamped_and_flagged) {
  ASSERT_NO_FATAL_FAILURE(start_with_hostile_pack());
  const auto healthy = info(env_of(*host_, "TestSleep"));
  const auto hostile = info(env_of(*host_, "HostileBudget"));
  ASSERT_EQ(healthy.state, runtime::worker_state::ready);
  ASSERT_EQ(hostile.state, runtime::worker_state::ready);
  const auto host_before = host_->on_io_thread([&] {
    auto& c = host_->memory().control();
    return std::make_tuple(c.claimed_reserved(0), c.grant(0), c.record(0).pid.load());
  });
  const std::uint64_t budget = host_->on_io_thread([&] { return host_->memory().budget_bytes(); });

  ASSERT_TRUE(run_node("TestSleep", {{"ms", 0}, {"pin_mib", 8}}).ok);
  const auto attacked = run_node("HostileBudget", {{"pin_mib", 4}});
  ASSERT_TRUE(attacked.ok) << (attacked.error ? attacked.error->dump() : "");
  // The attack really ran: the control memfd (open, map, write, punch), its mappings and the
  // host's fds were each tried.
  EXPECT_GE(attacked.nodes.at("1").outputs[0].get<int>(), 5) << attacked.nodes.at("1").outputs;

  // The liar claims 2^64 - 1 bytes; the host counts its grant and flags it.
  const auto liar = host_->on_io_thread([&] {
    auto& c = host_->memory().control();
    const std::uint64_t claimed = c.claimed_reserved(hostile.slot);
    const std::uint64_t counted = c.counted_reserved(hostile.slot);  // this read flags it
    return std::make_tuple(claimed, counted, c.grant(hostile.slot), c.flagged(hostile.slot));
  });
  EXPECT_EQ(std::get<0>(liar), ~std::uint64_t{0});
  EXPECT_EQ(std::get<1>(liar), std::get<2>(liar));
  EXPECT_GE(std::get<2>(liar), 4u << 20);
  EXPECT_LE(std::get<2>(liar), budget);
  EXPECT_TRUE(std::get<3>(liar));

  // The host's own slot is intact and nobody else is flagged.
  const auto host_after = host_->on_io_thread([&] {
    auto& c = host_->memory().control();
    return std::make_tuple(c.claimed_reserved(0), c.grant(0), c.record(0).pid.load());
  });
  EXPECT_EQ(host_after, host_before);
  EXPECT_EQ(std::get<2>(host_after), static_cast<std::uint64_t>(::getpid()));
  EXPECT_FALSE(host_->on_io_thread([&] { return host_->memory().control().flagged(0); }));
  EXPECT_FALSE(
      host_->on_io_thread([&] { return host_->memory().control().flagged(healthy.slot); }));

  // Healthy workers still reserve pinned memory for their later nodes.
  for (int i = 0; i < 3; ++i) {
    const auto later = run_node("TestSleep", {{"ms", 0}, {"pin_mib", 16}});
    EXPECT_TRUE(later.ok) << (later.error ? later.error->dump() : "");
  }
  EXPECT_EQ(
      host_->on_io_thread([&] { return host_->memory().control().claimed_reserved(healthy.slot); }),
      (8u + 3 * 16u) << 20);

  // The table is sane: no row counts more than the budget, the sum fits, the liar is named.
  const auto rows = host_->on_io_thread([&] { return runtime::read_memory_table(*host_); });
  std::uint64_t sum = 0;
  bool named = false;
  for (const auto& r : rows) {
    EXPECT_LE(r.pinned_reserved, budget) << r.process;
    sum += r.pinned_reserved;
    if (r.pid == hostile.pid) {
      named = r.reason.find("claimed more pinned memory than it was granted") != std::string::npos;
    }
  }
  EXPECT_LE(sum, budget);
  EXPECT_TRUE(named) << "the memory table does not flag the hostile worker";
  const std::string table = runtime::format_memory_table(rows);
  EXPECT_EQ(table.find("OVER BUDGET"), std::string::npos) << table;
  EXPECT_LE(host_->on_io_thread([&] { return host_->memory().control().total_reserved(); }),
            budget);
  EXPECT_LE(host_->on_io_thread([&] { return host_->memory().control().granted_total(); }), budget);
}

// One host process (machine_budget_host) with its stdin and stdout on pipes.
struct host_process {
  pid_t pid = -1;
  int to = -1;    // its stdin: closing it lets the host exit
  int from = -1;  // its stdout: one line
  std::string line;
};

host_process spawn_host(std::uint64_t pool, const std::string& ledger) {
  int in[2], out[2];
  EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  std::vector<std::string> env{std::string(ipc::machine_ledger_variable) + "=" + ledger};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind(ipc::machine_ledger_variable, 0) != 0) env.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string exe = ORCH_TEST_MACHINE_BUDGET_HOST, size = std::to_string(pool);
  char* argv[] = {exe.data(), size.data(), nullptr};
  host_process h;
  EXPECT_EQ(::posix_spawn(&h.pid, exe.c_str(), &actions, nullptr, argv, envp.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  h.to = in[1];
  h.from = out[0];
  return h;
}

std::string read_line(int fd) {
  std::string line;
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

TEST_F(budget_faults,
       three_hosts_share_one_machine_budget_and_the_one_that_does_not_fit_names_the_others) {
  // A private ledger: parallel test runs and real hosts on this machine keep their own.
  const std::string ledger = "/orch-test-machine-" + std::to_string(::getpid());
  auto readings = ipc::probe_memory_readings();
  ASSERT_TRUE(readings.ok());
  const std::uint64_t budget = ipc::compute_pinned_budget(*readings).bytes;
  // Each asks for 45 % of the machine's budget (9 GiB pools of ~9.4 GiB on a 24 GiB machine
  // refuse two hosts of three; 45 % refuses exactly one on any machine).
  const std::uint64_t pool = budget / 100 * 45 / (1 << 20) * (1 << 20);
  std::vector<host_process> hosts;
  for (int i = 0; i < 3; ++i) hosts.push_back(spawn_host(pool, ledger));
  for (auto& h : hosts) h.line = read_line(h.from);

  std::vector<pid_t> started;
  std::vector<std::string> refusals;
  for (const auto& h : hosts) {
    if (h.line.rfind("ok ", 0) == 0) started.push_back(h.pid);
    if (h.line.rfind("refused ", 0) == 0) refusals.push_back(h.line);
  }
  EXPECT_EQ(started.size(), 2u);
  ASSERT_EQ(refusals.size(), 1u) << "lines: " << hosts[0].line << " | " << hosts[1].line << " | "
                                 << hosts[2].line;
  const std::string& why = refusals[0];
  EXPECT_NE(why.find("machine_budget_exceeded"), std::string::npos) << why;
  EXPECT_NE(why.find("pinned_pool_size"), std::string::npos) << why;
  for (const pid_t pid : started) {
    EXPECT_NE(why.find("pid " + std::to_string(pid) + " holds"), std::string::npos) << why;
  }

  auto live = ipc::machine_ledger::snapshot(ledger);
  ASSERT_TRUE(live.ok()) << live.err().message;
  std::uint64_t sum = 0;
  for (const auto& h : *live) sum += h.reserved;
  EXPECT_EQ(live->size(), 2u);
  EXPECT_GE(sum, 2 * pool);
  EXPECT_LE(sum, budget);

  for (auto& h : hosts) {
    ::close(h.to);
    int status = 0;
    EXPECT_EQ(::waitpid(h.pid, &status, 0), h.pid);
    ::close(h.from);
  }
  // The last host to leave removed the ledger's name.
  EXPECT_NE(::access(("/dev/shm" + ledger).c_str(), F_OK), 0);
}

}  // namespace
}  // namespace orch::runtime_testing
