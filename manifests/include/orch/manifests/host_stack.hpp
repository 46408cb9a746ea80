// The host's Python stack and its ABI tag (docs/references.md, comfy-env §1.4): an env is built
// for one Python minor, one torch major.minor and one accelerator, because tensors cross the
// process boundary through torch's private reduction ABI with no handshake of its own. An env
// built for another tag must not be launched.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace orch::manifests {

struct host_stack {
  std::string python;       // "3.11"
  std::string torch;        // full version as installed ("2.10.1+cu128"); empty: no torch
  std::string accelerator;  // "cu128", "rocm6.2", "cpu"; ignored without torch
  std::string version{};    // sys.version in full, as ComfyUI's /system_stats shows it
};

// "py311-torch2.10-cu128", or "py311-notorch": ADR-0039's spelling, dots kept.
std::string abi_tag(const host_stack& stack);

// Whether two tags name the same stack. comfy-env wrote "py311-torch2-10-cu128" before
// ADR-0039 (its tag went through the pixi-name sanitizer, dots became dashes) and
// "py311-torch2.10-cu128" after; both spellings of one stack are equal.
bool same_abi_tag(std::string_view a, std::string_view b);

// Whether `text` is an ABI tag in either spelling ("py311-torch2.10-cu128",
// "py311-torch2-10-cu128", "py312-notorch"): what tells `foo_py311-notorch`, an env of `foo`,
// from `foo-pyramid`, another pack's.
bool looks_like_abi_tag(std::string_view text);

// "==2.10.*": the torch pin of every env built for this stack (major.minor, the tag's
// granularity); nullopt without torch.
std::optional<std::string> torch_pin(const host_stack& stack);

// torchvision and torchaudio releases paired with a torch major.minor ("0.25.*", "2.10.*"), the
// pairing PyTorch has kept since torch 2.0 (torchvision 0.(minor+15), torchaudio = torch);
// nullopt for a torch this rule does not cover (1.x).
std::optional<std::string> torchvision_pin(const host_stack& stack);
std::optional<std::string> torchaudio_pin(const host_stack& stack);

}  // namespace orch::manifests
