// Encoders and decoders for every call in call_table.h, made from the
// parameter kinds: the client's side (encode a request from the C
// arguments, decode a reply into them) and the worker's (decode a request
// into slots that own the arguments the driver is called with, then encode
// the reply). Sans-I/O and header-only but for module_image_bytes and the
// handle table (call_codec.cpp); the stand-in compiles it too.
//
// What the worker trusts: nothing. A request that cannot be decoded (short,
// long, a length past its bound) ends the session; a handle the worker did
// not hand out, or a buffer whose length disagrees with its length
// parameter, fails that call (CUDA_ERROR_INVALID_HANDLE,
// CUDA_ERROR_INVALID_VALUE) without reaching the driver. Device pointers are
// passed through: the driver checks them, and a kernel that misuses one
// faults only its own context.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpu/remote/call_table.h"
#include "gpu/remote/wire.h"

namespace yonder::gpu::remote {

template <class P>
using ArgOf = typename P::Arg;

// The length of a module image as the driver will read it: a fatbin's
// header (magic 0xBA55ED50) gives its size, an ELF cubin's section table
// ends it, anything else is text read to its NUL (PTX) and counts the NUL.
// At most `limit` bytes are read; 0 when the image is not recognisable or
// longer than `limit`.
size_t module_image_bytes(const void* image, size_t limit);

// The handles a session's worker handed out, by id. Id 0 is the null
// handle of every kind (the driver decides whether it is valid); the two
// stream values that are not handles (CU_STREAM_LEGACY, _PER_THREAD) pass
// as themselves. Bounded: a client cannot grow it past max_entries.
enum class HandleKind : uint8_t { kContext = 1, kStream, kEvent, kModule, kFunction };
template <class H>
struct HandleKindOf;
template <>
struct HandleKindOf<CUcontext> {
  static constexpr HandleKind value = HandleKind::kContext;
};
template <>
struct HandleKindOf<CUstream> {
  static constexpr HandleKind value = HandleKind::kStream;
};
template <>
struct HandleKindOf<CUevent> {
  static constexpr HandleKind value = HandleKind::kEvent;
};
template <>
struct HandleKindOf<CUmodule> {
  static constexpr HandleKind value = HandleKind::kModule;
};
template <>
struct HandleKindOf<CUfunction> {
  static constexpr HandleKind value = HandleKind::kFunction;
};

class HandleTable {
 public:
  explicit HandleTable(size_t max_entries = 1u << 20) : max_entries_(max_entries) {}
  bool full() const { return entries_.size() >= max_entries_; }
  // The id of a new handle; `parent` (0 for none) drops it when dropped.
  uint64_t add(HandleKind kind, void* handle, uint64_t parent);
  bool lookup(HandleKind kind, uint64_t id, void*& handle) const;
  // Forgets `id` and every handle whose parent it is.
  void drop(uint64_t id);
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    HandleKind kind;
    void* handle;
    uint64_t parent;
  };
  std::unordered_map<uint64_t, Entry> entries_;
  uint64_t next_ = 0x1000;
  size_t max_entries_;
};

// One of cuLaunchKernel's `extra` keys, as the pointer it is passed as.
inline void* launch_key(int key) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(key));
}

template <class H>
uint64_t handle_id(H handle) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
}
template <class H>
H handle_from_id(uint64_t id) {
  return reinterpret_cast<H>(static_cast<uintptr_t>(id));
}

// ---- The client's side ----
namespace client {

template <class P>
struct Kind;

template <class T>
struct Kind<In<T>> {
  template <class Args>
  static bool valid(T, const Args&) {
    return true;
  }
  template <class Args>
  static void encode(Writer& w, T value, const Args&) {
    w.put(value);
  }
  static bool decode(Reader&, T) { return true; }
};

template <class T>
struct Kind<Out<T>> {
  template <class Args>
  static bool valid(T* out, const Args&) {
    return out != nullptr;
  }
  template <class Args>
  static void encode(Writer&, T*, const Args&) {}
  static bool decode(Reader& r, T* out) { return r.take(*out); }
};

template <class T>
struct Kind<OptOut<T>> {  // the value is always sent back; written only where asked for
  template <class Args>
  static bool valid(T*, const Args&) {
    return true;
  }
  template <class Args>
  static void encode(Writer&, T*, const Args&) {}
  static bool decode(Reader& r, T* out) {
    T value{};
    if (!r.take(value)) return false;
    if (out != nullptr) *out = value;
    return true;
  }
};

template <class H>
struct HandleIn {
  template <class Args>
  static bool valid(H, const Args&) {
    return true;
  }
  template <class Args>
  static void encode(Writer& w, H handle, const Args&) {
    w.put(handle_id(handle));
  }
  static bool decode(Reader&, H) { return true; }
};
template <class H>
struct Kind<InHandle<H>> : HandleIn<H> {};
template <class H>
struct Kind<DropHandle<H>> : HandleIn<H> {};

template <class H>
struct HandleOut {
  template <class Args>
  static bool valid(H* out, const Args&) {
    return out != nullptr;
  }
  template <class Args>
  static void encode(Writer&, H*, const Args&) {}
  static bool decode(Reader& r, H* out) {
    uint64_t id;
    if (!r.take(id)) return false;
    *out = handle_from_id<H>(id);
    return true;
  }
};
template <class H>
struct Kind<OutHandle<H>> : HandleOut<H> {};
template <class H, size_t Parent>
struct Kind<OutChildHandle<H, Parent>> : HandleOut<H> {};

template <size_t L, class Args>
uint64_t length_of(const Args& args) {
  return static_cast<uint64_t>(std::get<L>(args));
}

template <size_t L>
struct Kind<InBytes<L>> {
  template <class Args>
  static bool valid(const void* data, const Args& args) {
    return data != nullptr || length_of<L>(args) == 0;
  }
  template <class Args>
  static void encode(Writer& w, const void* data, const Args& args) {
    uint64_t n = length_of<L>(args);
    w.put(n);
    w.put_bytes(data, n);
  }
  static bool decode(Reader&, const void*) { return true; }
};

template <size_t L, class C>
struct BytesOut {
  template <class Args>
  static bool valid(C* out, const Args& args) {
    return out != nullptr || length_of<L>(args) == 0;
  }
  template <class Args>
  static void encode(Writer&, C*, const Args&) {}
  // The reply carries exactly the length asked for; the caller checks it.
  static bool decode(Reader& r, C* out, uint64_t expected) {
    uint32_t n;
    const uint8_t* bytes;
    if (!r.take(n) || n != expected || !r.take_bytes(n, bytes)) return false;
    if (n != 0) std::memcpy(out, bytes, n);
    return true;
  }
};
template <size_t L>
struct Kind<OutBytes<L>> : BytesOut<L, void> {};
template <size_t L>
struct Kind<OutChars<L>> : BytesOut<L, char> {};

template <>
struct Kind<InName> {
  template <class Args>
  static bool valid(const char* name, const Args&) {
    return name != nullptr && ::strnlen(name, kMaxNameBytes) < kMaxNameBytes;
  }
  template <class Args>
  static void encode(Writer& w, const char* name, const Args&) {
    auto n = static_cast<uint32_t>(::strnlen(name, kMaxNameBytes));
    w.put(n);
    w.put_bytes(name, n);
  }
  static bool decode(Reader&, const char*) { return true; }
};

template <>
struct Kind<InImage> {
  template <class Args>
  static bool valid(const void* image, const Args&) {
    return image != nullptr && module_image_bytes(image, kMaxFrameBytes - 64) != 0;
  }
  template <class Args>
  static void encode(Writer& w, const void* image, const Args&) {
    auto n = static_cast<uint32_t>(module_image_bytes(image, kMaxFrameBytes - 64));
    w.put(n);
    w.put_bytes(image, n);
  }
  static bool decode(Reader&, const void*) { return true; }
};

// Checks the arguments as the driver would before anything is sent (a null
// output, a null buffer of non-zero length, an overlong name).
template <class... P>
bool valid(const std::tuple<ArgOf<P>...>& args) {
  return [&]<size_t... I>(std::index_sequence<I...>) {
    return (Kind<P>::valid(std::get<I>(args), args) && ...);
  }
  (std::index_sequence_for<P...>{});
}

// Appends the request frame for `id`.
template <class... P>
void encode_request(std::vector<uint8_t>& out, CallId id, const std::tuple<ArgOf<P>...>& args) {
  size_t at = begin_frame(out);
  Writer w(out);
  w.put(static_cast<uint16_t>(id));
  [&]<size_t... I>(std::index_sequence<I...>) {
    (Kind<P>::encode(w, std::get<I>(args), args), ...);
  }
  (std::index_sequence_for<P...>{});
  finish_frame(out, at);
}

template <class P>
struct IsBytesOut : std::false_type {};
template <size_t L>
struct IsBytesOut<OutBytes<L>> : std::true_type {
  static constexpr size_t kLength = L;
};
template <size_t L>
struct IsBytesOut<OutChars<L>> : std::true_type {
  static constexpr size_t kLength = L;
};

// Fills the outputs from a successful reply's remaining bytes; false when
// the reply does not match the call (the session is then broken).
template <class... P>
bool decode_outputs(Reader& r, const std::tuple<ArgOf<P>...>& args) {
  bool ok = [&]<size_t... I>(std::index_sequence<I...>) {
    return ([&] {
      using K = std::tuple_element_t<I, std::tuple<P...>>;
      if constexpr (IsBytesOut<K>::value) {
        return Kind<K>::decode(r, std::get<I>(args), length_of<IsBytesOut<K>::kLength>(args));
      } else {
        return Kind<K>::decode(r, std::get<I>(args));
      }
    }() && ...);
  }
  (std::index_sequence_for<P...>{});
  return ok && r.at_end();
}

}  // namespace client

// ---- The worker's side ----
namespace worker {

// What decoding and checking a request found.
enum class Check { kOk, kMalformed, kBadHandle, kBadValue };

template <class P>
struct Slot;

template <class T>
struct Slot<In<T>> {
  T value{};
  bool decode(Reader& r, const HandleTable&) { return r.take(value); }
  template <class Slots>
  Check prepare(const Slots&, const HandleTable&) {
    return Check::kOk;
  }
  T arg() { return value; }
  template <class Slots>
  void commit(const Slots&, HandleTable&) {}
  void encode(Writer&) const {}
  uint64_t length() const { return static_cast<uint64_t>(value); }
};

template <class T>
struct Slot<Out<T>> {
  T value{};
  bool decode(Reader&, const HandleTable&) { return true; }
  template <class Slots>
  Check prepare(const Slots&, const HandleTable&) {
    return Check::kOk;
  }
  T* arg() { return &value; }
  template <class Slots>
  void commit(const Slots&, HandleTable&) {}
  void encode(Writer& w) const { w.put(value); }
};

template <class T>
struct Slot<OptOut<T>> : Slot<Out<T>> {};  // the driver always gets somewhere to write

template <class H>
struct HandleInSlot {
  uint64_t id = 0;
  H handle{};
  bool found = false;
  bool decode(Reader& r, const HandleTable& table) {
    if (!r.take(id)) return false;
    void* raw = nullptr;
    found = table.lookup(HandleKindOf<H>::value, id, raw);
    handle = static_cast<H>(raw);
    return true;
  }
  template <class Slots>
  Check prepare(const Slots&, const HandleTable&) {
    return found ? Check::kOk : Check::kBadHandle;
  }
  H arg() { return handle; }
  void encode(Writer&) const {}
};
template <class H>
struct Slot<InHandle<H>> : HandleInSlot<H> {
  template <class Slots>
  void commit(const Slots&, HandleTable&) {}
};
template <class H>
struct Slot<DropHandle<H>> : HandleInSlot<H> {
  template <class Slots>
  void commit(const Slots&, HandleTable& table) {
    if (this->id > 2) table.drop(this->id);
  }
};

template <class H>
struct HandleOutSlot {
  H handle{};
  uint64_t id = 0;
  bool decode(Reader&, const HandleTable&) { return true; }
  template <class Slots>
  Check prepare(const Slots&, const HandleTable& table) {
    return table.full() ? Check::kBadValue : Check::kOk;
  }
  H* arg() { return &handle; }
  void encode(Writer& w) const { w.put(id); }
};
template <class H>
struct Slot<OutHandle<H>> : HandleOutSlot<H> {
  template <class Slots>
  void commit(const Slots&, HandleTable& table) {
    this->id = table.add(HandleKindOf<H>::value, this->handle, 0);
  }
};
template <class H, size_t Parent>
struct Slot<OutChildHandle<H, Parent>> : HandleOutSlot<H> {
  template <class Slots>
  void commit(const Slots& slots, HandleTable& table) {
    this->id = table.add(HandleKindOf<H>::value, this->handle, std::get<Parent>(slots).id);
  }
};

template <size_t L>
struct Slot<InBytes<L>> {
  uint64_t size = 0;
  const uint8_t* data = nullptr;
  bool decode(Reader& r, const HandleTable&) {
    return r.take(size) && size <= kMaxFrameBytes && r.take_bytes(static_cast<size_t>(size), data);
  }
  template <class Slots>
  Check prepare(const Slots& slots, const HandleTable&) {
    return std::get<L>(slots).length() == size ? Check::kOk : Check::kBadValue;
  }
  const void* arg() { return data; }
  template <class Slots>
  void commit(const Slots&, HandleTable&) {}
  void encode(Writer&) const {}
};

// A buffer the driver fills, sent back whole. Copies' buffers are not
// zeroed first (the driver writes every byte of a copy that succeeds, and
// a failed call's buffer is not sent); names' are.
template <size_t L, class C, uint64_t Bound, bool Zeroed>
struct BytesOutSlot {
  std::unique_ptr<uint8_t[]> buffer;
  size_t size = 0;
  bool decode(Reader&, const HandleTable&) { return true; }
  template <class Slots>
  Check prepare(const Slots& slots, const HandleTable&) {
    uint64_t n = std::get<L>(slots).length();
    if (n > Bound) return Check::kBadValue;
    size = static_cast<size_t>(n);
    buffer.reset(Zeroed ? new uint8_t[size]() : new uint8_t[size]);
    return Check::kOk;
  }
  C* arg() { return reinterpret_cast<C*>(buffer.get()); }
  template <class Slots>
  void commit(const Slots&, HandleTable&) {}
  void encode(Writer& w) const {
    w.put(static_cast<uint32_t>(size));
    w.put_bytes(buffer.get(), size);
  }
};
template <size_t L>
struct Slot<OutBytes<L>> : BytesOutSlot<L, void, kCopyChunkBytes, false> {};
template <size_t L>
struct Slot<OutChars<L>> : BytesOutSlot<L, char, kMaxNameBytes, true> {};

template <>
struct Slot<InName> {
  std::string name;
  bool decode(Reader& r, const HandleTable&) {
    uint32_t n;
    const uint8_t* bytes;
    if (!r.take(n) || n >= kMaxNameBytes || !r.take_bytes(n, bytes)) return false;
    name.assign(reinterpret_cast<const char*>(bytes), n);
    return name.find('\0') == std::string::npos;
  }
  template <class Slots>
  Check prepare(const Slots&, const HandleTable&) {
    return Check::kOk;
  }
  const char* arg() { return name.c_str(); }
  template <class Slots>
  void commit(const Slots&, HandleTable&) {}
  void encode(Writer&) const {}
};

template <>
struct Slot<InImage> {
  uint32_t size = 0;
  const uint8_t* data = nullptr;
  bool decode(Reader& r, const HandleTable&) { return r.take(size) && r.take_bytes(size, data); }
  // The driver reads an image by its own header, or text to its NUL: the
  // bytes received must hold all of it.
  template <class Slots>
  Check prepare(const Slots&, const HandleTable&) {
    return size != 0 && module_image_bytes(data, size) == size ? Check::kOk : Check::kBadValue;
  }
  const void* arg() { return data; }
  template <class Slots>
  void commit(const Slots&, HandleTable&) {}
  void encode(Writer&) const {}
};

template <class... P>
using Slots = std::tuple<Slot<P>...>;

// Decodes a request's arguments (after its call id) into `slots`.
template <class... P>
Check decode(Reader& r, const HandleTable& table, Slots<P...>& slots) {
  bool decoded = std::apply([&](auto&... s) { return (s.decode(r, table) && ...); }, slots);
  if (!decoded || !r.at_end()) return Check::kMalformed;
  Check check = Check::kOk;
  std::apply([&](auto&... s) { ((check == Check::kOk ? (check = s.prepare(slots, table)) : check), ...); }, slots);
  return check;
}

// Calls `fn` with the slots' arguments.
template <class... P, class Fn>
CUresult call(Slots<P...>& slots, Fn&& fn) {
  return std::apply([&](auto&... s) { return fn(s.arg()...); }, slots);
}

// After a successful call: records handles, then encodes the outputs.
template <class... P>
void commit(Slots<P...>& slots, HandleTable& table, Writer* reply) {
  std::apply([&](auto&... s) { (s.commit(slots, table), ...); }, slots);
  if (reply != nullptr) std::apply([&](const auto&... s) { (s.encode(*reply), ...); }, slots);
}

}  // namespace worker

}  // namespace yonder::gpu::remote
