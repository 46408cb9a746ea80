// serve_request_fields: the fields of ComfyUI's request bodies, read as ComfyUI's server.py
// reads them (Python's truth values, float(), str()), and the UUIDs it makes for prompts.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace orch::serve {

// A random (version 4) UUID, as ComfyUI's prompt ids are.
std::string uuid4();
// The ids of a {"delete": [...]} body; strings only.
std::vector<std::string> ids_of(const nlohmann::json& body);
// Body flag `key` (front, clear, unload_models, free_memory) as Python tests it: true, a number
// but 0, and a string, array or object that is not empty.
bool flag(const nlohmann::json& body, const char* key);
// ComfyUI's float(number): a JSON number, or a string that is one ("3", "-1.5").
std::optional<double> number_of(const nlohmann::json& v);
// The prompt_id a client sent, which must be a UUID in canonical form (ComfyUI's validate_job_id
// at Comfy-Org/ComfyUI 002c3fb9: the id is compared verbatim everywhere after). nullopt: none
// (absent or null: a new one is made), or, with `refused` set, one that is no such UUID.
std::optional<std::string> prompt_id_of(const nlohmann::json& body, bool& refused);
// Whether `id` is a UUID in canonical lowercase hyphenated form (str(uuid.UUID(id)) == id).
bool canonical_uuid(std::string_view id);
// A queue number as ComfyUI's JSON has it: an integer where it is whole (its counter's), else
// the float a client sent.
nlohmann::json queue_number(double number);

}  // namespace orch::serve
