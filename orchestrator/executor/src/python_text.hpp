// python_text: values as ComfyUI's messages print them, since its validation errors are Python
// f-strings (execution.py at a125cd84): str() of a value ("1", "0.5", "True", "None"), repr() of
// a list of strings (['a', 'b']), and what int() and float() raise for a value they cannot
// convert. Clients match on these texts, and people read them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace orch::executor {

// str(value) of a JSON value: a string as it is, an integer without a point, a float as repr()
// writes it (5.0, 0.1, 1e+20), true as True, null as None, lists and objects as repr() does.
std::string python_str(const nlohmann::json& value);

// repr() of a list of strings: ['a', "it's"].
std::string python_list_repr(const std::vector<std::string>& items);

// A number as ComfyUI holds it after int() (INT) or float() (FLOAT): 5 -> "5.0" for a FLOAT.
std::string python_number(double value, bool integer);

// Why int() (`integer`) or float() refuses `value`, as Python's exception says it; nullopt when
// it converts. A float that is not whole is refused for an INT here, where ComfyUI's int()
// truncates it (docs/serve.md: comfy-orch sends the node the value as it was written).
std::optional<std::string> conversion_failure(const nlohmann::json& value, bool integer);

}  // namespace orch::executor
