// Remote CUDA's call protocol: a program's CUDA driver calls, made on the
// consumer's machine, executed by a worker next to the provider's GPU.
//
//   program ── stand-in libcuda.so.1 ══ frames ══ worker ── real libcuda.so.1
//
// The exchange (one ordered, reliable byte stream; today a unix socket, the
// peer link's stream later):
// - The client opens with a hello request (call 0: magic, its version);
//   the worker answers with its version and the largest frame it accepts.
//   A version it does not speak ends the session with a reply saying so.
// - Then requests, each one driver call: `u32 length | u16 call | args`.
//   Calls are synchronous or fire-and-forget, fixed per call by the table
//   (call_table.h). Only synchronous calls are answered, in order:
//   `u32 length | i32 result | u16 deferred call | i32 deferred result |
//   outputs`. A fire-and-forget call that fails is not answered; its failure
//   rides the next reply as the deferred pair (the first one since the last
//   reply), so errors surface at the next synchronising call, as a GPU's
//   asynchronous errors do.
// - Either side may end the session by closing the stream; the worker's
//   driver then frees everything the session held.
//
// Little-endian throughout (both ends are little-endian: x86-64 and
// aarch64; asserted below). Every length is bounded before anything is
// allocated: a frame by kMaxFrameBytes, names and strings by kMaxNameBytes.
//
// Sans-I/O: this header and call_codec.h never touch a socket, a clock or a
// thread. Plain C++ on the standard library only, because the stand-in
// (loaded into the consumer's program) compiles them too.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <vector>

namespace yonder::gpu::remote {

static_assert(std::endian::native == std::endian::little, "the call protocol is little-endian");

inline constexpr uint32_t kHelloMagic = 0x41445543;  // "CUDA"
inline constexpr uint16_t kProtocolVersion = 1;
// The largest frame either side sends or accepts, length prefix excluded:
// a module image (a library's fatbin) must fit in one.
inline constexpr uint32_t kMaxFrameBytes = 64u << 20;
// Copies travel in chunks of this size, so a large copy streams instead of
// holding the stream for its whole length.
inline constexpr uint32_t kCopyChunkBytes = 1u << 20;
// Kernel and symbol names, device names.
inline constexpr uint32_t kMaxNameBytes = 4096;
// A reply's fixed part: result, deferred call, deferred result.
inline constexpr size_t kReplyHeaderBytes = 4 + 2 + 4;

// Appends little-endian values to a frame under construction.
class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  template <class T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &value, sizeof(T));
  }
  void put_bytes(const void* data, size_t size) {
    if (size == 0) return;
    const auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + size);
  }
  std::vector<uint8_t>& buffer() { return out_; }

 private:
  std::vector<uint8_t>& out_;
};

// Reads a frame's body; any read past the end fails the reader for good,
// and the caller checks ok() once at the end.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <class T>
  bool take(T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (!ok_ || size_ - at_ < sizeof(T)) return ok_ = false;
    std::memcpy(&value, data_ + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  // A view of the next `size` bytes (valid while the frame is).
  bool take_bytes(size_t size, const uint8_t*& out) {
    if (!ok_ || size_ - at_ < size) return ok_ = false;
    out = data_ + at_;
    at_ += size;
    return true;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return ok_ && at_ == size_; }
  void fail() { ok_ = false; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
  bool ok_ = true;
};

// Starts a frame: reserves its length prefix; finish_frame() fills it in.
inline size_t begin_frame(std::vector<uint8_t>& out) {
  size_t at = out.size();
  out.resize(at + 4);
  return at;
}
inline void finish_frame(std::vector<uint8_t>& out, size_t at) {
  auto length = static_cast<uint32_t>(out.size() - at - 4);
  std::memcpy(out.data() + at, &length, 4);
}

// Splits whole frames off the front of received bytes. Returns the body
// length of the first complete frame, 0 when more bytes are needed, or -1
// when the prefix announces an empty frame or more than kMaxFrameBytes (no
// message is empty: the session ends).
inline int64_t complete_frame(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t length;
  std::memcpy(&length, data, 4);
  if (length == 0 || length > kMaxFrameBytes) return -1;
  if (size - 4 < length) return 0;
  return length;
}

// Appends the client's hello frame (call 0: magic, version).
inline void encode_hello(std::vector<uint8_t>& out, uint16_t version = kProtocolVersion) {
  size_t at = begin_frame(out);
  Writer w(out);
  w.put(uint16_t{0});
  w.put(kHelloMagic);
  w.put(version);
  finish_frame(out, at);
}

// What the worker says when a session cannot start.
enum class HelloRefusal : int32_t {
  kBadMagic = 1,
  kVersion = 2,
};

}  // namespace yonder::gpu::remote
