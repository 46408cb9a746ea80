#include "orch/manifests/host_stack.hpp"

#include <charconv>
#include <regex>

#include "orch/manifests/env_naming.hpp"

namespace orch::manifests {
namespace {

// "2.10" from "2.10.1+cu128"; empty when the version has no minor.
std::string major_minor(std::string_view version) {
  const auto first = version.find('.');
  if (first == std::string_view::npos) return {};
  auto end = version.find_first_not_of("0123456789", first + 1);
  if (end == first + 1) return {};
  return std::string(version.substr(0, end == std::string_view::npos ? version.size() : end));
}

// (major, minor) of a torch version; nullopt when either is not a number.
std::optional<std::pair<int, int>> torch_numbers(const host_stack& stack) {
  const std::string mm = major_minor(stack.torch);
  if (mm.empty()) return std::nullopt;
  int major = 0;
  int minor = 0;
  const auto dot = mm.find('.');
  if (std::from_chars(mm.data(), mm.data() + dot, major).ec != std::errc{} ||
      std::from_chars(mm.data() + dot + 1, mm.data() + mm.size(), minor).ec != std::errc{}) {
    return std::nullopt;
  }
  return std::pair{major, minor};
}

}  // namespace

std::string abi_tag(const host_stack& stack) {
  std::string python;
  for (char c : stack.python) {
    if (c != '.') python += c;
  }
  std::string tag = "py" + (python.empty() ? std::string("unknown") : python);
  const std::string torch = major_minor(stack.torch);
  if (torch.empty()) return tag + "-notorch";
  return tag + "-torch" + torch + "-" + (stack.accelerator.empty() ? "cpu" : stack.accelerator);
}

bool same_abi_tag(std::string_view a, std::string_view b) {
  return sanitize_env_part(a) == sanitize_env_part(b);
}

bool looks_like_abi_tag(std::string_view text) {
  static const std::regex tag(R"(py(\d+|unknown)-(notorch|torch\d+[.-]\d+-[a-z0-9.]+))");
  return text.size() < 64 && std::regex_match(text.begin(), text.end(), tag);
}

std::optional<std::string> torch_pin(const host_stack& stack) {
  const std::string mm = major_minor(stack.torch);
  if (mm.empty()) return std::nullopt;
  return "==" + mm + ".*";
}

std::optional<std::string> torchvision_pin(const host_stack& stack) {
  const auto numbers = torch_numbers(stack);
  if (!numbers || numbers->first != 2) return std::nullopt;
  return "==0." + std::to_string(numbers->second + 15) + ".*";
}

std::optional<std::string> torchaudio_pin(const host_stack& stack) {
  const auto numbers = torch_numbers(stack);
  if (!numbers || numbers->first != 2) return std::nullopt;
  return torch_pin(stack);
}

}  // namespace orch::manifests
