// SHA-256 (FIPS 180-4), for content identities that other tools compute too: comfy-env's
// env.stamp.json names its pixi.lock by sha256, and an env's derivation identity is a sha256.
// Not for security decisions; the project links no crypto library.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace orch::support {

class sha256 {
 public:
  sha256();
  void update(std::string_view bytes);
  std::array<std::uint8_t, 32> digest();  // finishes; the object must not be updated after
  std::string hex_digest();               // 64 lower-case hex characters

 private:
  void compress(const std::uint8_t* block);
  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t length_ = 0;  // bytes so far
};

// The hex digest of `bytes` in one call.
std::string sha256_hex(std::string_view bytes);

}  // namespace orch::support
