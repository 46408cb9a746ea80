#include "orch/ipc/lane_memory.hpp"

#include <new>

#include "orch/ipc/errc.hpp"

namespace orch::ipc {
namespace {

std::uint64_t lane_page_bytes() noexcept { return round_up(sizeof(lane_page), page_size()); }

}  // namespace

result<lane_memory> lane_memory::create() {
  auto file = memfd_segment::create("orch-lane", lane_page_bytes());
  if (!file) return file.err();
  auto map = mapping::map(file->fd(), 0, lane_page_bytes(), /*writable=*/true);
  if (!map) return map.err();
  // A fresh memfd reads as zeros: every count and flag starts at 0.
  auto* page = new (map->data()) lane_page;
  page->magic = lane_page_magic;
  page->version = lane_page_version;
  page->reserved = 0;
  page->size = sizeof(lane_page);
  return lane_memory(std::move(*file), std::move(*map));
}

result<lane_memory> lane_memory::attach(unique_fd fd) {
  auto file = memfd_segment::adopt(std::move(fd), lane_page_bytes());
  if (!file) return file.err();
  auto map = mapping::map(file->fd(), 0, lane_page_bytes(), /*writable=*/true);
  if (!map) return map.err();
  const auto* page = reinterpret_cast<const lane_page*>(map->data());
  if (page->magic != lane_page_magic || page->version != lane_page_version ||
      page->size != sizeof(lane_page)) {
    return error{shm_errc::bad_segment, "the call lane's page has another layout (magic, version "
                                        "or size): host and worker are of different builds"};
  }
  (void)file->release();  // the mapping is all the worker needs
  return lane_memory(std::move(*file), std::move(*map));
}

}  // namespace orch::ipc
