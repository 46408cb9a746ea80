// png_metadata: a PNG's text chunks and ICC profile read as Pillow 9.4 reads them (its
// PngImagePlugin's chunk_tEXt, chunk_zTXt, chunk_iTXt and chunk_iCCP), and written back as its
// PngInfo.add_text and its PNG writer write them, so that /upload/mask keeps what ComfyUI keeps
// (a SaveImage file's `prompt` and `workflow`). libpng hands these chunks over raw
// (png_codec.cpp), so that Pillow's rules apply rather than libpng's own:
//
// - tEXt: the keyword up to the first NUL (all of it, with no text, when there is none); one with
//   an empty keyword is dropped.
// - zTXt: the same, inflated; a compression method other than 0 refuses the file; text that does
//   not inflate is kept empty.
// - iTXt: dropped when malformed, when compressed by another method, when it does not inflate or
//   is not UTF-8.
// - iCCP: the profile after the name and method byte, inflated (none when it does not inflate);
//   a chunk without a NUL refuses the file.
// - Inflated, one chunk may be at most 1 MiB and the texts 64 MiB in all (Pillow's
//   MAX_TEXT_CHUNK and MAX_TEXT_MEMORY): past either, the file is refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "orch/serve/image_codec.hpp"

namespace orch::serve {

class png_metadata_reader {
 public:
  // The chunk types handed to take(), as libpng's png_set_keep_unknown_chunks lists them: each
  // name followed by a NUL.
  static constexpr const char* chunk_list = "tEXt\0zTXt\0iTXt\0iCCP";
  static constexpr int chunk_count = 4;

  // Reads one chunk of type `type` (4 bytes). False when Pillow would refuse the file for it;
  // failure() says why. Chunks of other types are not read (true). Never throws (libpng calls it).
  bool take(const char* type, const std::uint8_t* data, std::size_t size) noexcept;
  const std::string& failure() const { return failure_; }
  // What was read, in Pillow's order; the reader is empty after.
  image_metadata release();

 private:
  bool take_text(std::string keyword, std::string text, bool international, std::string language,
                 std::string translated, std::size_t counted);
  bool refuse(std::string why);

  image_metadata metadata_;
  std::map<std::string, std::size_t> index_;  // keyword -> its place in metadata_.texts
  std::size_t text_memory_ = 0;
  std::string failure_;
};

// The chunks Pillow writes for `metadata`, in its order: an iCCP chunk (named "ICC Profile",
// deflated as zlib.compress does) when there is a profile, then one tEXt or iTXt per text,
// uncompressed. Each is its 4-byte type and its data.
std::vector<std::pair<std::string, std::string>> png_metadata_chunks(
    const image_metadata& metadata);

}  // namespace orch::serve
