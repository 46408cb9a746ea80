// ComfyUI's hidden values as a node call carries them (docs/python.md, "hidden").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "orch/executor/prompt.hpp"
#include "orch/runtime/node_catalogue.hpp"

namespace orch::executor {

// {"PROMPT": the API prompt, "EXTRA_PNGINFO": the request's PNG info} for a class that declares
// PROMPT, DYNPROMPT (built from PROMPT in the worker) or EXTRA_PNGINFO; an empty object for one
// that declares none. A value the call cannot carry goes as null, with a warning naming the node:
// nested deeper than a body may be (ipc::max_body_depth, counting the body and "hidden" above
// it), or larger than a quarter of a body as JSON text. The node then sees None, where a body
// the worker refuses would cost it its channel.
nlohmann::json hidden_values(const prompt& p, const runtime::node_class& cls,
                             const std::string& node_id);

}  // namespace orch::executor
