#include "orch/ipc/pool_segment.hpp"
#include "orch/ipc/errc.hpp"

#include <bit>
#include <new>
#include <string>
#include <utility>

namespace orch::ipc {
namespace {

constexpr std::uint64_t max_data_size = std::uint64_t{1} << 44;  // 16 TiB: keeps sizes sane

std::uint64_t metadata_bytes(std::uint64_t entry_count) {
  return round_up(sizeof(segment_header) + entry_count * sizeof(std::uint64_t), page_size());
}

}  // namespace

pool_segment::pool_segment(memfd_segment file, mapping meta, mapping data,
                           segment_geometry geometry, pin_registrar& registrar)
    : file_(std::move(file)),
      meta_(std::move(meta)),
      data_(std::move(data)),
      geometry_(geometry),
      registrar_(&registrar) {}

pool_segment::pool_segment(pool_segment&& other) noexcept
    : file_(std::move(other.file_)),
      meta_(std::move(other.meta_)),
      data_(std::move(other.data_)),
      geometry_(other.geometry_),
      registrar_(std::exchange(other.registrar_, nullptr)) {}

pool_segment::~pool_segment() {
  // Unregister before unmapping (NCCL order): the backend must never hold an unmapped range.
  if (registrar_ != nullptr && data_.data() != nullptr) {
    registrar_->unregister_range(data_.data(), data_.size());
  }
}

result<pool_segment> pool_segment::create(std::uint32_t id, std::uint64_t data_size,
                                          std::uint64_t granule, pin_registrar& registrar) {
  if (id == 0 || granule < 64 || !std::has_single_bit(granule) || data_size == 0 ||
      data_size > max_data_size) {
    return error{shm_errc::invalid_argument,
                 "a pool segment needs an id > 0, a power-of-two granule >= 64 and a data size "
                 "between 1 byte and 16 TiB"};
  }
  data_size = round_up(round_up(data_size, granule), page_size());
  const std::uint64_t entry_count = data_size / granule;
  const std::uint64_t data_offset = metadata_bytes(entry_count);
  auto file = memfd_segment::create("orch-pool-" + std::to_string(id), data_offset + data_size);
  if (!file) return file.err();
  auto meta = mapping::map(file->fd(), 0, data_offset, /*writable=*/true);
  if (!meta) return meta.err();
  auto data = mapping::map(file->fd(), data_offset, data_size, /*writable=*/true);
  if (!data) return data.err();

  // A fresh memfd reads as zeros, so every block entry already says "no live block".
  auto* header = new (meta->data()) segment_header{};
  header->magic = segment_magic;
  header->version = segment_layout_version;
  header->header_size = sizeof(segment_header);
  header->segment_id = id;
  header->total_size = data_offset + data_size;
  header->data_offset = data_offset;
  header->data_size = data_size;
  header->granule = granule;
  header->entry_count = entry_count;

  if (auto st = registrar.register_range(data->data(), data->size()); !st) return st.err();
  return pool_segment(std::move(*file), std::move(*meta), std::move(*data),
                      segment_geometry{id, data_size, granule}, registrar);
}

result<pool_segment> pool_segment::attach(unique_fd fd, std::uint64_t expected_size,
                                          pin_registrar& registrar) {
  auto file = memfd_segment::adopt(std::move(fd), expected_size);
  if (!file) return file.err();
  if (file->size() < sizeof(segment_header)) {
    return error{shm_errc::bad_segment, "segment is smaller than its header"};
  }
  // Map the first page to read the header, then remap the whole metadata once its size is known.
  auto first = mapping::map(file->fd(), 0, page_size(), /*writable=*/false);
  if (!first) return first.err();
  const segment_header header = *reinterpret_cast<const segment_header*>(first->data());
  first->reset();
  if (header.magic != segment_magic || header.version != segment_layout_version ||
      header.header_size != sizeof(segment_header) || header.segment_id == 0 ||
      header.total_size != file->size() || header.granule < 64 ||
      !std::has_single_bit(header.granule) || header.data_size > max_data_size ||
      header.entry_count != header.data_size / header.granule ||
      header.data_offset != metadata_bytes(header.entry_count) ||
      header.data_offset + header.data_size != header.total_size) {
    return error{shm_errc::bad_segment,
                 "segment header failed validation (magic, version or geometry)"};
  }
  auto meta = mapping::map(file->fd(), 0, header.data_offset, /*writable=*/false);
  if (!meta) return meta.err();
  auto data = mapping::map(file->fd(), header.data_offset, header.data_size, /*writable=*/true);
  if (!data) return data.err();
  if (auto st = registrar.register_range(data->data(), data->size()); !st) return st.err();
  return pool_segment(std::move(*file), std::move(*meta), std::move(*data),
                      segment_geometry{header.segment_id, header.data_size, header.granule},
                      registrar);
}

std::span<std::atomic<std::uint64_t>> pool_segment::entries() const noexcept {
  auto* first =
      reinterpret_cast<std::atomic<std::uint64_t>*>(meta_.data() + sizeof(segment_header));
  return {first, static_cast<std::size_t>(geometry_.data_size / geometry_.granule)};
}

status pool_segment::validate(const buffer_descriptor& d) const {
  return validate_descriptor(d, geometry_, entries());
}

result<std::span<std::byte>> pool_segment::bytes(const buffer_descriptor& d) const {
  if (auto st = validate(d); !st) return st.err();
  return data_.bytes().subspan(static_cast<std::size_t>(d.offset),
                               static_cast<std::size_t>(d.size));
}

void pool_segment::publish_block(std::uint64_t offset, std::uint64_t size,
                                 std::uint32_t generation) noexcept {
  const auto granules =
      static_cast<std::uint32_t>((size + geometry_.granule - 1) / geometry_.granule);
  entries()[offset / geometry_.granule].store(pack_block_entry(generation, granules),
                                              std::memory_order_release);
}

void pool_segment::retire_block(std::uint64_t offset) noexcept {
  entries()[offset / geometry_.granule].store(0, std::memory_order_release);
}

}  // namespace orch::ipc
