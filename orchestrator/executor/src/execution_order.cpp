// execution_order (declared in prompt_validation.hpp): the order a validated prompt runs in.

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "orch/executor/prompt_validation.hpp"

namespace orch::executor {

std::vector<std::string> execution_order(const prompt& p, const std::vector<std::string>& outputs) {
  // A post-order walk on an explicit stack (a chain may be 100,000 nodes long). A node is marked
  // when it is first reached, so a cycle (validation rejects them) cannot loop.
  struct pending {
    std::string id;
    std::vector<std::string> deps;  // sorted, unique: ties broken by node id
    std::size_t next = 0;
  };
  const auto deps_of = [&](const std::string& id) {
    std::set<std::string> deps;
    for (const auto& [name, value] : p.nodes.at(id).inputs) {
      if (const auto* link = std::get_if<node_link>(&value)) deps.insert(link->node_id);
    }
    return std::vector<std::string>(deps.begin(), deps.end());
  };
  std::vector<std::string> order;
  std::set<std::string> done;
  std::vector<pending> stack;
  const auto reach = [&](const std::string& id) {
    if (!p.nodes.count(id) || !done.insert(id).second) return;
    stack.push_back({id, deps_of(id)});
  };
  std::vector<std::string> sorted = outputs;
  std::sort(sorted.begin(), sorted.end());
  for (const auto& out : sorted) {
    reach(out);
    while (!stack.empty()) {
      pending& top = stack.back();
      if (top.next < top.deps.size()) {
        const std::string dep = top.deps[top.next++];  // a copy: reach() may move the stack
        reach(dep);
        continue;
      }
      order.push_back(std::move(top.id));
      stack.pop_back();
    }
  }
  return order;
}

}  // namespace orch::executor
