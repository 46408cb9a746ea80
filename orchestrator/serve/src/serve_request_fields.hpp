// serve_request_fields: the fields of ComfyUI's request bodies, read as ComfyUI's server.py
// reads them (Python's truth values, float(), str()), and the UUIDs it makes for prompts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace orch::orchestrator {

// A random (version 4) UUID, as ComfyUI's prompt ids are.
std::string uuid4();
// The ids of a {"delete": [...]} body; strings only.
std::vector<std::string> ids_of(const nlohmann::json& body);
// Body flag `key` (front, clear, unload_models, free_memory) as Python tests it: true, a number
// but 0, and a string, array or object that is not empty.
bool flag(const nlohmann::json& body, const char* key);
// ComfyUI's float(number): a JSON number, or a string that is one ("3", "-1.5").
std::optional<double> number_of(const nlohmann::json& v);
// ComfyUI's str(prompt_id) for what a client sends: a string as it is, a number or a boolean as
// Python prints it. nullopt: none (absent or null: a new one is made), or, with `refused` set,
// one that is no id (an array, an object).
std::optional<std::string> prompt_id_of(const nlohmann::json& body, bool& refused);

}  // namespace orch::orchestrator
