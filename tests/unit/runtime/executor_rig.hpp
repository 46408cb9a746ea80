// executor_rig: a host_runtime on a throwaway cpu deployment of one native pack, whose worker is
// a fake_worker (fake_launcher) with the node classes below, and an executor over it. The pack's
// library is an empty file: nothing loads it, the fake worker only names its classes.
//
// The fake pack's classes, each answering as its name says:
//   Number (value: INT) -> INT       its value
//   Add    (a, b: INT)  -> INT       a + b
//   Show   (value: INT)              an output node; its UI is {"text": [value]}
//   Wait   (value: INT) -> INT       answers only once its prompt is interrupted
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "fake_launcher.hpp"
#include "leak_check.hpp"
#include "orch/executor/events.hpp"
#include "orch/executor/executor.hpp"
#include "orch/runtime/host_runtime.hpp"

namespace orch::runtime_testing {

class executor_test : public ipc::testing::leak_checked_test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Starts the host (its one worker ready) and an executor with this cache policy.
  void start(manifests::cache_policy cache);
  // Validates and runs a prompt (API format), as `comfy-orch run` does.
  executor::prompt_outcome run(const std::string& prompt_json);
  // The events of this type the executor emitted so far.
  std::vector<nlohmann::json> events_of(const std::string& type) const;

  std::shared_ptr<fake_launcher> launcher_;
  std::unique_ptr<runtime::host_runtime> host_;
  std::unique_ptr<executor::executor> executor_;
  executor::recording_event_sink events_;

 private:
  std::filesystem::path dir_;
  int prompts_ = 0;
};

}  // namespace orch::runtime_testing
