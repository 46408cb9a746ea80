#include "orch/runtime/ui_messages.hpp"

#include <limits>
#include <string>

#include "orch/runtime/errc.hpp"
#include "orch/support/untrusted_text.hpp"

namespace orch::runtime {
namespace {

using json = nlohmann::json;

error refused(const std::string& why) { return {runtime_errc::bad_ui_message, why}; }

bool bounded_text(const json& v, std::size_t most) {
  return v.is_string() && !v.get_ref<const std::string&>().empty() &&
         v.get_ref<const std::string&>().size() <= most;
}

// A count: a non-negative integer however it was encoded (CBOR and JSON text give unsigned ones,
// a signed one is as good), else 0.
std::uint64_t number(const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  return v.is_number_integer() && v.get<std::int64_t>() > 0 ? v.get<std::uint64_t>() : 0;
}

bool is_count(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
}

result<json> checked_preview(const json& body) {
  const json& p = body["preview"];
  if (!p.is_object()) return refused("its preview is not an object");
  const json format = p.value("format", json());
  if (format != "JPEG" && format != "PNG" && format != "WEBP")
    return refused("its preview's format is none of JPEG, PNG and WEBP");
  const std::uint64_t width = number(p.value("width", json())),
                      height = number(p.value("height", json()));
  if (width == 0 || height == 0 || width > max_preview_side || height > max_preview_side)
    return refused("its preview is not between 1 and " + std::to_string(max_preview_side) +
                   " pixels on each side");
  const json& pixels = p.value("pixels", json());
  if (!pixels.is_binary() || pixels.get_binary().size() != width * height * 3)
    return refused("its preview's pixels are not width * height RGB bytes");
  if (!bounded_text(body.value("node", json()), 256) || !is_count(body.value("value", json())) ||
      !is_count(body.value("max", json())))
    return refused("its preview has no node, value and max");
  return json{{"node", body["node"]},
              {"value", number(body["value"])},
              {"max", number(body["max"])},
              {"preview",
               {{"format", format},
                {"width", width},
                {"height", height},
                {"max_size", number(p.value("max_size", json()))},
                {"pixels", pixels}}}};
}

}  // namespace

result<json> checked_ui_message(const json& body) {
  if (!body.is_object()) return refused("it is not an object");
  if (body.contains("preview")) return checked_preview(body);
  json event = body.value("event", json());
  if (is_count(event)) event = number(event);  // a binary event's, however it was encoded
  const json sid = body.value("sid", json());
  if (!sid.is_null() && !bounded_text(sid, 256)) return refused("its sid is not a client id");
  json data = body.value("data", json());
  if (event.is_number_unsigned()) {
    if (event.get<std::uint64_t>() > std::numeric_limits<std::uint32_t>::max())
      return refused("its binary event is not a 32-bit number");
    if (!data.is_binary()) return refused("its binary event's data is not bytes");
  } else if (!bounded_text(event, 256) || !is_printable(event.get<std::string>())) {
    return refused("its event is neither a name nor a binary event's number");
  }
  return json{{"event", event}, {"data", std::move(data)}, {"sid", sid}};
}

}  // namespace orch::runtime
