#include "gpu/remote/call_codec.h"

#include <cstring>

namespace yonder::gpu::remote {

namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50;

// Reads a little-endian value at `at`, or returns false when it lies past
// `limit`.
template <class T>
bool read_at(const uint8_t* p, size_t limit, size_t at, T& out) {
  if (at > limit || limit - at < sizeof(T)) return false;
  std::memcpy(&out, p + at, sizeof(T));
  return true;
}

}  // namespace

size_t module_image_bytes(const void* image, size_t limit) {
  const auto* p = static_cast<const uint8_t*>(image);
  if (p == nullptr || limit == 0) return 0;
  uint32_t magic = 0;
  if (limit >= 4) std::memcpy(&magic, p, 4);
  if (magic == kFatbinMagic) {
    // The fatbin wrapper's header: u32 magic, u16 version, u16 header size,
    // u64 size of what follows the header.
    uint16_t header = 0;
    uint64_t body = 0;
    if (!read_at(p, limit, 6, header) || !read_at(p, limit, 8, body) || header < 16) return 0;
    if (body > limit || limit - body < header) return 0;
    return header + body;
  }
  if (limit >= 4 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') {
    // A 64-bit ELF cubin: the section header table is its last part.
    uint8_t elf_class = 0;
    uint64_t shoff = 0;
    uint16_t shentsize = 0;
    uint16_t shnum = 0;
    if (!read_at(p, limit, 4, elf_class) || elf_class != 2) return 0;
    if (!read_at(p, limit, 0x28, shoff) || !read_at(p, limit, 0x3A, shentsize) || !read_at(p, limit, 0x3C, shnum))
      return 0;
    uint64_t table = uint64_t{shentsize} * shnum;
    if (shoff > limit || limit - shoff < table) return 0;
    uint64_t end = shoff + table;
    return end < 64 ? 0 : end;
  }
  // Text (PTX): to its NUL, which the driver reads too.
  const void* nul = std::memchr(p, 0, limit);
  if (nul == nullptr) return 0;
  return static_cast<size_t>(static_cast<const uint8_t*>(nul) - p) + 1;
}

uint64_t HandleTable::add(HandleKind kind, void* handle, uint64_t parent) {
  uint64_t id = next_++;
  entries_[id] = Entry{kind, handle, parent};
  return id;
}

bool HandleTable::lookup(HandleKind kind, uint64_t id, void*& handle) const {
  if (id == 0 || (kind == HandleKind::kStream && id <= 2)) {
    handle = reinterpret_cast<void*>(static_cast<uintptr_t>(id));
    return true;
  }
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.kind != kind) return false;
  handle = it->second.handle;
  return true;
}

void HandleTable::drop(uint64_t id) {
  entries_.erase(id);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.parent == id) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

namespace {

constexpr CallInfo kCalls[] = {
#define YONDER_REMOTE_CALL_INFO(id, name, mode, origin, ...) {id, #name, Mode::mode, Origin::origin},
    YONDER_REMOTE_CUDA_CALLS(YONDER_REMOTE_CALL_INFO)
#undef YONDER_REMOTE_CALL_INFO
};

}  // namespace

const CallInfo* find_call(uint16_t id) {
  for (const auto& call : kCalls) {
    if (call.id == id) return &call;
  }
  return nullptr;
}

const CallInfo* find_call(const char* name) {
  for (const auto& call : kCalls) {
    if (std::strcmp(call.name, name) == 0) return &call;
  }
  return nullptr;
}

const CallInfo* all_calls(size_t& count) {
  count = sizeof(kCalls) / sizeof(kCalls[0]);
  return kCalls;
}

}  // namespace yonder::gpu::remote
