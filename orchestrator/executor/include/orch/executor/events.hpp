// events: ComfyUI's execution messages (docs/runtime.md; server.py send_sync names and fields):
// execution_start, executing, progress, executed, execution_error, execution_interrupted,
// execution_success. A sink prints them for people or as JSON lines ({"type", "data"}, the
// websocket's shape) for programs. Sinks are called from more than one thread (progress arrives
// on the io thread), so each serialises its own output.
#pragma once

#include <mutex>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace orch::executor {

class event_sink {
 public:
  virtual ~event_sink() = default;
  virtual void emit(const std::string& type, const nlohmann::json& data) = 0;
};

// One line per event: the type, then the data's fields as key=value.
class text_event_sink final : public event_sink {
 public:
  explicit text_event_sink(std::ostream& out) : out_(out) {}
  void emit(const std::string& type, const nlohmann::json& data) override;

 private:
  std::mutex mutex_;
  std::ostream& out_;
};

// One JSON object per line: {"type": ..., "data": {...}}.
class json_event_sink final : public event_sink {
 public:
  explicit json_event_sink(std::ostream& out) : out_(out) {}
  void emit(const std::string& type, const nlohmann::json& data) override;

 private:
  std::mutex mutex_;
  std::ostream& out_;
};

// Keeps every event, for tests and for callers that inspect a run afterwards.
class recording_event_sink final : public event_sink {
 public:
  void emit(const std::string& type, const nlohmann::json& data) override;
  nlohmann::json events() const;  // [{"type", "data"}...]

 private:
  mutable std::mutex mutex_;
  nlohmann::json events_ = nlohmann::json::array();
};

}  // namespace orch::executor
