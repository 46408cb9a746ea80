// node_outcome: what one node of a prompt gave, as the executor and the execution cache keep it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace orch::executor {

struct node_outcome {
  std::string class_type;
  std::string env;
  // One value per slot: as the worker returned them for a node called once; for a node mapped
  // over lists (list_mapping.hpp), each slot's list of items.
  nlohmann::json outputs = nlohmann::json::array();
  nlohmann::json inputs_seen = nlohmann::json::object();  // tensors as the worker mapped them
  double call_us = 0;  // host -> worker -> host for this node's call(s); 0 when served cached
  // ComfyUI's view of the outputs: per slot, the list of items consumers are mapped over.
  nlohmann::json output_lists = nlohmann::json::array();
  // What the class's IS_CHANGED gave for this node's literal inputs (ComfyUI's cache key
  // ingredient); null when it has none, or when it failed, which ComfyUI reads as "always
  // changed" (the node is then never cached).
  nlohmann::json change_key;
  // The node's UI dict (ComfyUI's {"ui": {...}}: images, text, ...), what `executed` carries;
  // null when the node returned none. Merged per key over the calls of a mapped node.
  nlohmann::json ui;
  bool cached = false;  // served from the execution cache, not run
};

}  // namespace orch::executor
