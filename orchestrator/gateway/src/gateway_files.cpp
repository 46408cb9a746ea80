// gateway_api's file store (gateway_api.hpp; docs/fleet.md, "Files across hosts"): the gateway
// keeps its own input, output and temp directories and answers /view, /upload/image and
// /upload/mask over them with serve's own routes (serve_files.hpp). What goes to and comes from
// the hosts is gateway_inputs.cpp's and gateway_outputs.cpp's.
#include "orch/gateway/gateway_api.hpp"

namespace orch::gateway {

void gateway_api::add_file_routes(serve::route_table& table) {
  using request = const serve::http_request&;
  // serve's own: the gateway's store is a serve's input, output and temp directories.
  table.add(
      {.method = "GET", .path = "/view", .answer = [this](request r) { return files_.view(r); }});
  table.add(
      {.method = "POST", .path = "/upload/image", .upload = true, .answer = [this](request r) {
         return files_.upload_image(r);
       }});
  table.add({.method = "POST", .path = "/upload/mask", .upload = true, .answer = [this](request r) {
               return files_.upload_mask(r);
             }});
}

}  // namespace orch::gateway
