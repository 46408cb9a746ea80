// Which worker's aiohttp route serve forwards a request to (orch/serve/worker_routes.hpp): its
// literal part answers the path, the longest wins, the first env keeps a tie, and the routes of
// a later env at the same literal part are named at start.
#include "orch/serve/worker_routes.hpp"

#include <gtest/gtest.h>

namespace orch::serve {
namespace {

worker_route route(std::string env, std::string path) {
  worker_route r;
  r.env = std::move(env);
  r.path = path;
  const auto variable = path.find('{');
  r.literal = path.substr(0, variable);
  r.exact = variable == std::string::npos;
  return r;
}

TEST(worker_routes, a_routes_literal_part_answers_its_paths_under_api_too) {
  const std::vector<worker_route> routes = {route("a", "/pack/file"),
                                            route("a", "/pack/item/{name}/{rest:.*}")};
  EXPECT_EQ(env_answering(routes, "/pack/file"), "a");
  EXPECT_EQ(env_answering(routes, "/api/pack/file"), "a");
  EXPECT_EQ(env_answering(routes, "/pack/item/x/y/z"), "a");
  EXPECT_EQ(env_answering(routes, "/pack/file/more"), std::nullopt);  // exact: no variable
  EXPECT_EQ(env_answering(routes, "/pack/other"), std::nullopt);
  EXPECT_EQ(env_answering(routes, "/"), std::nullopt);  // the page is never a pack's
  EXPECT_EQ(env_answering(routes, "/assets/index.js"), std::nullopt);
  EXPECT_EQ(env_answering(routes, "/api/ws"), std::nullopt);
}

TEST(worker_routes, the_longest_literal_part_wins_and_the_first_env_keeps_a_tie) {
  const std::vector<worker_route> routes = {route("a", "/shared/{x}"), route("b", "/shared/{y}"),
                                            route("b", "/shared/b/{z}")};
  EXPECT_EQ(env_answering(routes, "/shared/q"), "a");
  EXPECT_EQ(env_answering(routes, "/shared/b/q"), "b");
  const auto clashes = worker_route_clashes(routes);
  ASSERT_EQ(clashes.size(), 1u);
  EXPECT_EQ(clashes[0],
            "route /shared/{y} of env b is not served: env a has a route at /shared/ first; give "
            "each pack a prefix of its own");
}

}  // namespace
}  // namespace orch::serve
