// response_bodies: the shapes of the response bodies a worker sends, checked in one place, as
// message.cpp checks request bodies (docs/protocol.md). A worker is a process the host does not
// trust: a body that passes here can be read with operator[] and get<> on the io thread without a
// throw. Errors: body_errc::bad_field naming the field.
#pragma once

#include <nlohmann/json.hpp>

#include "orch/support/result.hpp"

namespace orch::ipc {

// A call's response: {status: "ok", outputs: list, inputs_seen?: map, allocations?: list,
// models?: report} or {status: other text, error: {type?: text, message?: text, required?: uint},
// allocations?: list, models?: report}.
status check_call_response(const nlohmann::json& body);

// The models a worker reports in a response (calls, free, evict): {sequence: uint >= 1,
// models: [{key: text, size: uint, resident: uint}]}. A body without "models" has no report.
status check_models_report(const nlohmann::json& body);

// A free or evict receipt: {freed: uint, resident: uint} and a models report.
status check_release_receipt(const nlohmann::json& body);

}  // namespace orch::ipc
