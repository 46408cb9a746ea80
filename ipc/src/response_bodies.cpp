#include "orch/ipc/response_bodies.hpp"

#include <string>

#include "orch/ipc/errc.hpp"

namespace orch::ipc {
namespace {

using nlohmann::json;

error bad(const std::string& what) {
  return error{body_errc::bad_field, "the worker's response " + what};
}

bool has(const json& body, const char* key, bool (json::*kind)() const noexcept) {
  auto it = body.find(key);
  return it != body.end() && ((*it).*kind)();
}

bool absent_or(const json& body, const char* key, bool (json::*kind)() const noexcept) {
  auto it = body.find(key);
  return it == body.end() || ((*it).*kind)();
}

}  // namespace

status check_models_report(const json& body) {
  if (!body.is_object() || !body.contains("models")) return ok_status();
  auto seq = body.find("sequence");
  if (seq == body.end() || !seq->is_number_unsigned() || seq->get<std::uint64_t>() == 0) {
    return bad("reports models without a sequence number above 0");
  }
  const json& models = body["models"];
  if (!models.is_array()) return bad("has models that are not a list");
  for (const json& m : models) {
    if (!m.is_object() || !has(m, "key", &json::is_string) ||
        !has(m, "size", &json::is_number_unsigned) ||
        !has(m, "resident", &json::is_number_unsigned)) {
      return bad("lists a model without key (text), size and resident (unsigned)");
    }
  }
  return ok_status();
}

status check_call_response(const json& body) {
  if (!body.is_object() || !has(body, "status", &json::is_string)) {
    return bad("to a call has no status");
  }
  if (body["status"] == "ok") {
    if (!has(body, "outputs", &json::is_array)) return bad("to a call has no outputs list");
    if (!absent_or(body, "inputs_seen", &json::is_object)) {
      return bad("to a call has inputs_seen that is not a map");
    }
    if (!absent_or(body, "ui", &json::is_object)) return bad("to a call has a ui that is not a map");
    if (!absent_or(body, "expand", &json::is_object))
      return bad("to a call has an expand that is not a map");
  } else {
    if (!has(body, "error", &json::is_object)) return bad("to a failed call has no error map");
    const json& e = body["error"];
    if (!absent_or(e, "type", &json::is_string) || !absent_or(e, "message", &json::is_string) ||
        !absent_or(e, "required", &json::is_number_unsigned)) {
      return bad("to a failed call has an error with a type, message or required of another kind");
    }
  }
  if (!absent_or(body, "allocations", &json::is_array)) {
    return bad("to a call has allocations that are not a list");
  }
  return check_models_report(body);
}

status check_release_receipt(const json& body) {
  if (!body.is_object() || !has(body, "freed", &json::is_number_unsigned) ||
      !has(body, "resident", &json::is_number_unsigned)) {
    return bad("to a free or evict has no freed and resident byte counts");
  }
  return check_models_report(body);
}

}  // namespace orch::ipc
