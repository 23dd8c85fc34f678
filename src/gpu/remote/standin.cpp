// The stand-in driver, libcuda.so.1 on the consumer's machine: a program
// (or the CUDA runtime inside it) loads it in place of NVIDIA's driver, and
// each driver call it makes is sent to a worker next to a real GPU
// (worker.h) and answered from there.
//
// Built from the call table: every row of origin kGenerated becomes an
// exported function of the driver's own name and signature; the rows of
// origin kWritten are written below (the current context, chunked copies,
// launches, contexts made and destroyed); a few calls are answered here
// without the worker (the context stack, host memory, module files,
// cuGetErrorName/String, cuGetProcAddress).
//
// The session: one connection per process to the socket named by
// YONDER_CUDA_SOCKET, opened at the first call, guarded by one mutex (the
// driver is thread-safe; replies come back in order). Fire-and-forget calls
// are buffered and sent in batches, before the next synchronous call or
// when kFlushBytes have gathered. The current context is per thread, as on
// the driver: the stand-in keeps it per thread and tells the worker (whose
// one thread runs every call) before a call from a thread whose context
// differs from the last one sent.
//
// Built without sanitizers and with its symbols bound to itself
// (-Bsymbolic): it is loaded into programs that are not ours.
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "gpu/cuda/driver_api.h"
#include "gpu/remote/call_codec.h"
#include "gpu/remote/call_table.h"
#include "gpu/remote/param_lists.h"
#include "gpu/remote/wire.h"

#define YONDER_EXPORT extern "C" __attribute__((visibility("default")))

namespace yonder::gpu::remote {
namespace {

constexpr CUresult kLinkLost = 46;  // CUDA_ERROR_DEVICE_UNAVAILABLE
constexpr CUresult kAlreadyRegistered = 712;  // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
constexpr CUresult kNotRegistered = 713;      // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
constexpr size_t kFlushBytes = 256 * 1024;
// Chunks of a copy from the device requested before the first is read.
constexpr size_t kCopyWindow = 8;

void say(const char* format, ...) __attribute__((format(printf, 1, 2)));
void say(const char* format, ...) {
  std::fputs("yonder cuda: ", stderr);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fputc('\n', stderr);
}

// This thread's context stack, as the driver keeps it: t_current on top of
// t_below.
thread_local CUcontext t_current = nullptr;
thread_local std::vector<CUcontext> t_below;

void push_context(CUcontext ctx) {
  t_below.push_back(t_current);
  t_current = ctx;
}
void pop_context() {
  t_current = t_below.empty() ? nullptr : t_below.back();
  if (!t_below.empty()) t_below.pop_back();
}

// What the worker's thread had current after a call that changed it in ways
// the stand-in cannot follow (a destroyed context pops the worker's own
// stack): the next call sends its thread's context whatever it is.
const CUcontext kWorkerContextUnknown = reinterpret_cast<CUcontext>(~uintptr_t{0});

class Session {
 public:
  std::mutex mu;

  // Connects and greets once; then makes the worker's current context this
  // thread's. CUDA_SUCCESS, or the error every call returns from now on.
  CUresult ready_locked() {
    if (broken_ != CUDA_SUCCESS) return broken_;
    if (fd_ < 0) {
      if (CUresult r = connect_locked(); r != CUDA_SUCCESS) return broken_ = r;
    }
    if (t_current != worker_current_) {
      auto args = std::make_tuple(t_current);
      client::encode_request<InHandle<CUcontext>>(out_, CallId::cuCtxSetCurrent, args);
      worker_current_ = t_current;
    }
    return CUDA_SUCCESS;
  }

  std::vector<uint8_t>& out() { return out_; }
  // A call just made `ctx` current on the worker's thread.
  void worker_made_current_locked(CUcontext ctx) { worker_current_ = ctx; }

  CUresult after_async_locked() {
    if (out_.size() < kFlushBytes) return CUDA_SUCCESS;
    return flush_locked() ? CUDA_SUCCESS : lost_locked("sending");
  }

  // Sends what is buffered and reads the next reply's body into `reply`.
  CUresult round_trip_locked(std::vector<uint8_t>& reply) {
    if (!flush_locked()) return lost_locked("sending");
    if (!read_frame_locked(reply)) return lost_locked("waiting for the reply");
    return CUDA_SUCCESS;
  }

  // Takes a reply's fixed part; returns the call's result, or an earlier
  // fire-and-forget call's failure that the reply reports.
  CUresult result_of(Reader& r, CallId id) {
    int32_t result = 0;
    uint16_t deferred_call = 0;
    int32_t deferred_result = 0;
    if (!r.take(result) || !r.take(deferred_call) || !r.take(deferred_result)) {
      return broken("a reply too short to read");
    }
    if (deferred_result != CUDA_SUCCESS) {
      const CallInfo* failed = find_call(deferred_call);
      const CallInfo* here = find_call(static_cast<uint16_t>(id));
      say("an earlier %s failed on the GPU with error %d; reported at %s, the next call that waits",
          failed != nullptr ? failed->name : "call", deferred_result, here != nullptr ? here->name : "a call");
      if (result == CUDA_SUCCESS) return deferred_result;
    }
    return result;
  }

  // Requests `bytes` from the device at `src` in chunks, at most
  // kCopyWindow in flight, and reads each reply's bytes into `dst`.
  template <class... Extra>
  CUresult copy_from_device_locked(CallId id, uint8_t* dst, CUdeviceptr src, size_t bytes, Extra... extra) {
    size_t chunks = bytes == 0 ? 1 : (bytes + kCopyChunkBytes - 1) / kCopyChunkBytes;
    size_t asked = 0;  // chunks requested
    size_t read = 0;   // chunks answered
    CUresult first = CUDA_SUCCESS;
    while (read < asked || (first == CUDA_SUCCESS && asked < chunks)) {
      // After a failure nothing more is asked; what is in flight is read.
      while (first == CUDA_SUCCESS && asked < chunks && asked - read < kCopyWindow) {
        size_t at = asked * kCopyChunkBytes;
        size_t n = std::min<size_t>(bytes - at, kCopyChunkBytes);
        auto args = std::make_tuple(static_cast<void*>(dst + at), src + at, n, extra...);
        client::encode_request<OutBytes<2>, In<CUdeviceptr>, In<size_t>, InHandle<Extra>...>(out_, id, args);
        ++asked;
      }
      if (!flush_locked()) return lost_locked("sending");
      uint32_t length = 0;
      uint8_t header[kReplyHeaderBytes];
      if (!read_exact(reinterpret_cast<uint8_t*>(&length), 4) || length < kReplyHeaderBytes ||
          !read_exact(header, kReplyHeaderBytes)) {
        return lost_locked("waiting for the reply");
      }
      Reader r(header, kReplyHeaderBytes);
      CUresult result = result_of(r, id);
      size_t at = read * kCopyChunkBytes;
      size_t n = std::min<size_t>(bytes - at, kCopyChunkBytes);
      ++read;
      if (result != CUDA_SUCCESS) {
        if (length != kReplyHeaderBytes) return broken("a reply that does not match its call");
        if (first == CUDA_SUCCESS) first = result;
        continue;
      }
      uint32_t sent = 0;
      if (length != kReplyHeaderBytes + 4 + n || !read_exact(reinterpret_cast<uint8_t*>(&sent), 4) || sent != n ||
          !read_exact(dst + at, n)) {
        return broken("a reply that does not match its call");
      }
    }
    return first;
  }

  // A forked child shares the parent's connection but not its GPU state:
  // as with NVIDIA's driver, CUDA begun in the parent cannot be used in the
  // child (it may begin its own if the parent never did). The mutex is
  // made anew: another thread of the parent may have held it.
  void after_fork_in_child() {
    new (&mu) std::mutex();
    if (fd_ < 0) return;
    ::close(fd_);
    fd_ = -1;
    out_.clear();
    broken_ = CUDA_ERROR_NOT_INITIALIZED;
  }

  CUresult broken(const char* what) {
    say("the GPU's worker sent %s; the session is over: run the program again", what);
    close_locked();
    return broken_ = kLinkLost;
  }

 private:
  CUresult connect_locked() {
    const char* path = std::getenv("YONDER_CUDA_SOCKET");
    if (path == nullptr || *path == '\0') {
      say("YONDER_CUDA_SOCKET is not set, so there is no GPU to reach: run the program under "
          "`yonder cuda --on PEER -- PROGRAM`");
      return CUDA_ERROR_NO_DEVICE;
    }
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (std::strlen(path) >= sizeof(address.sun_path)) {
      say("YONDER_CUDA_SOCKET is longer than a socket path may be: %s", path);
      return CUDA_ERROR_NO_DEVICE;
    }
    std::strcpy(address.sun_path, path);
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      say("cannot reach the GPU's worker at %s (%s): is `yonder cuda` still running?", path, std::strerror(errno));
      if (fd >= 0) ::close(fd);
      return CUDA_ERROR_NO_DEVICE;
    }
    fd_ = fd;
    encode_hello(out_);
    std::vector<uint8_t> reply;
    if (CUresult r = round_trip_locked(reply); r != CUDA_SUCCESS) return r;
    Reader r(reply.data(), reply.size());
    int32_t result = 0;
    uint16_t ignored_call = 0;
    int32_t ignored_result = 0;
    uint16_t version = 0;
    uint32_t max_frame = 0;
    if (!r.take(result) || !r.take(ignored_call) || !r.take(ignored_result) || !r.take(version) || !r.take(max_frame)) {
      return broken("a hello too short to read");
    }
    if (result != CUDA_SUCCESS) {
      say("the GPU's worker speaks version %u of the call protocol, this stand-in %u: install the same Yonder "
          "release on both machines",
          version, kProtocolVersion);
      close_locked();
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
  }

  bool flush_locked() {
    size_t at = 0;
    while (at < out_.size()) {
      ssize_t n = ::send(fd_, out_.data() + at, out_.size() - at, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      at += static_cast<size_t>(n);
    }
    out_.clear();
    return true;
  }

  bool read_exact(uint8_t* data, size_t size) {
    while (size > 0) {
      ssize_t n = ::recv(fd_, data, size, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }

  bool read_frame_locked(std::vector<uint8_t>& body) {
    uint8_t prefix[4];
    if (!read_exact(prefix, 4)) return false;
    uint32_t length;
    std::memcpy(&length, prefix, 4);
    if (length < kReplyHeaderBytes || length > kMaxFrameBytes) return false;
    body.resize(length);
    return read_exact(body.data(), length);
  }

  CUresult lost_locked(const char* when) {
    say("the link to the GPU's worker closed while %s; this program's GPU state is gone: run it again", when);
    close_locked();
    return broken_ = kLinkLost;
  }

  void close_locked() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    out_.clear();
  }

  int fd_ = -1;
  CUresult broken_ = CUDA_SUCCESS;
  CUcontext worker_current_ = nullptr;
  std::vector<uint8_t> out_;
};

Session& session() {
  // Never destroyed: calls may come during exit.
  static Session* s = [] {
    auto* created = new Session();
    ::pthread_atfork(nullptr, nullptr, [] { session().after_fork_in_child(); });
    return created;
  }();
  return *s;
}

// One call through the session: checks, encodes, and for a synchronous call
// waits for the reply and fills the outputs; then, still holding the
// session, `after(session, result)` (the context calls keep the worker's
// current context in step there, before another thread's call goes out).
template <Mode M, class... P, class After>
CUresult remote_call_then(CallId id, After after, ArgOf<P>... a) {
  std::tuple<ArgOf<P>...> args(a...);
  if (!client::valid<P...>(args)) return CUDA_ERROR_INVALID_VALUE;
  Session& s = session();
  std::lock_guard lock(s.mu);
  if (CUresult r = s.ready_locked(); r != CUDA_SUCCESS) return r;
  client::encode_request<P...>(s.out(), id, args);
  if constexpr (M == Mode::kAsync) {
    return s.after_async_locked();
  } else {
    std::vector<uint8_t> reply;
    if (CUresult r = s.round_trip_locked(reply); r != CUDA_SUCCESS) return r;
    Reader r(reply.data(), reply.size());
    CUresult result = s.result_of(r, id);
    if (result == CUDA_SUCCESS && !client::decode_outputs<P...>(r, args)) {
      return s.broken("a reply that does not match its call");
    }
    after(s, result);
    return result;
  }
}

template <Mode M, class... P>
CUresult remote_call(CallId id, ArgOf<P>... a) {
  return remote_call_then<M, P...>(id, [](Session&, CUresult) {}, a...);
}

}  // namespace
}  // namespace yonder::gpu::remote

using namespace yonder::gpu::remote;  // NOLINT: the exports below are the table's rows

// ---- Generated: one export per kGenerated row ----
#define YONDER_REMOTE_EXPORT_kGenerated(name, mode, ...)                                                     \
  YONDER_EXPORT CUresult name(YONDER_REMOTE_PARAMS(__VA_ARGS__)) {                                           \
    return remote_call<Mode::mode __VA_OPT__(, ) __VA_ARGS__>(CallId::name YONDER_REMOTE_ARGS(__VA_ARGS__)); \
  }
#define YONDER_REMOTE_EXPORT_kWritten(name, mode, ...)
#define YONDER_REMOTE_EXPORT_kOurs(name, mode, ...)
#define YONDER_REMOTE_EXPORT(id, name, mode, origin, ...) \
  YONDER_REMOTE_EXPORT_##origin(name, mode __VA_OPT__(, ) __VA_ARGS__)
YONDER_REMOTE_CUDA_CALLS(YONDER_REMOTE_EXPORT)
#undef YONDER_REMOTE_EXPORT

// ---- Written ----

// Replaces the top of this thread's stack; NULL pops it, as on the driver.
YONDER_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (ctx == nullptr && !t_below.empty()) {
    pop_context();
  } else {
    t_current = ctx;
  }
  return CUDA_SUCCESS;
}

YONDER_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  push_context(ctx);
  return CUDA_SUCCESS;
}

YONDER_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx != nullptr) *ctx = t_current;
  pop_context();
  return CUDA_SUCCESS;
}

// A new context is pushed on this thread's stack, and is current on the
// worker's thread once the call returns there.
YONDER_EXPORT CUresult cuCtxCreate_v2(CUcontext* ctx, unsigned int flags, CUdevice device) {
  CUresult r = remote_call_then<Mode::kSync, OutHandle<CUcontext>, In<unsigned int>, In<CUdevice>>(
      CallId::cuCtxCreate_v2,
      [ctx](Session& s, CUresult result) {
        if (result == CUDA_SUCCESS) s.worker_made_current_locked(*ctx);
      },
      ctx, flags, device);
  if (r == CUDA_SUCCESS) push_context(*ctx);
  return r;
}

// Destroying a context pops it from the stack of the thread it is current
// to; on the worker's thread that uncovers a context the stand-in did not
// send, so the next call says which one it wants.
YONDER_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  CUresult r = remote_call_then<Mode::kSync, DropHandle<CUcontext>>(
      CallId::cuCtxDestroy_v2,
      [](Session& s, CUresult result) {
        if (result == CUDA_SUCCESS) s.worker_made_current_locked(kWorkerContextUnknown);
      },
      ctx);
  if (r == CUDA_SUCCESS && t_current == ctx) pop_context();
  return r;
}

YONDER_EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ctx = t_current;
  return CUDA_SUCCESS;
}

YONDER_EXPORT CUresult cuCtxSynchronize(void) {
  return remote_call<Mode::kSync>(CallId::cuCtxSynchronize);
}

namespace {

// Copies to the device go in chunks, fire-and-forget: the driver, too,
// returns from a copy out of pageable memory once the bytes are staged.
template <class... Extra>
CUresult copy_to_device(CallId id, CUdeviceptr dst, const void* src, size_t bytes, Extra... extra) {
  if (src == nullptr && bytes != 0) return CUDA_ERROR_INVALID_VALUE;
  const auto* from = static_cast<const uint8_t*>(src);
  size_t done = 0;
  do {
    size_t n = std::min<size_t>(bytes - done, kCopyChunkBytes);
    CUresult r = remote_call<Mode::kAsync, In<CUdeviceptr>, InBytes<2>, In<size_t>, InHandle<Extra>...>(
        id, dst + done, from + done, n, extra...);
    if (r != CUDA_SUCCESS) return r;
    done += n;
  } while (done < bytes);
  return CUDA_SUCCESS;
}

// Copies from the device wait for their bytes: chunks requested kCopyWindow
// at a time, each reply's bytes read straight into the caller's buffer.
template <class... Extra>
CUresult copy_from_device(CallId id, void* dst, CUdeviceptr src, size_t bytes, Extra... extra) {
  if (dst == nullptr && bytes != 0) return CUDA_ERROR_INVALID_VALUE;
  Session& s = session();
  std::lock_guard lock(s.mu);
  if (CUresult r = s.ready_locked(); r != CUDA_SUCCESS) return r;
  return s.copy_from_device_locked(id, static_cast<uint8_t*>(dst), src, bytes, extra...);
}

}  // namespace

YONDER_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  return copy_to_device(CallId::cuMemcpyHtoD_v2, dst, src, bytes);
}
YONDER_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  return copy_to_device(CallId::cuMemcpyHtoDAsync_v2, dst, src, bytes, stream);
}
YONDER_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  return copy_from_device(CallId::cuMemcpyDtoH_v2, dst, src, bytes);
}
// Waits for its bytes: the caller may only read them after synchronising,
// and having them sooner is allowed.
YONDER_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  return copy_from_device(CallId::cuMemcpyDtoHAsync_v2, dst, src, bytes, stream);
}

namespace {

// Each function's parameter layout, asked of the worker at its first launch
// and kept with its packed size; entries are never erased, so a pointer to
// one stays valid.
struct Layout {
  std::vector<std::pair<uint64_t, uint64_t>> params;  // (offset, size)
  uint64_t total = 0;                                 // bytes the packed arguments take
};
std::mutex g_layouts_mu;
std::unordered_map<CUfunction, Layout> g_layouts;

CUresult layout_of(CUfunction function, const Layout*& layout) {
  {
    std::lock_guard lock(g_layouts_mu);
    auto it = g_layouts.find(function);
    if (it != g_layouts.end()) {
      layout = &it->second;
      return CUDA_SUCCESS;
    }
  }
  uint32_t count = 0;
  uint64_t capacity = uint64_t{kMaxKernelParams} * 16;
  std::vector<uint8_t> pairs(capacity);
  CUresult r = remote_call<Mode::kSync, InHandle<CUfunction>, Out<uint32_t>, OutBytes<3>, In<uint64_t>>(
      CallId::ycFuncParamLayout, function, &count, pairs.data(), capacity);
  if (r != CUDA_SUCCESS) return r;
  if (count > kMaxKernelParams) return CUDA_ERROR_INVALID_VALUE;
  Layout fetched;
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t offset;
    uint64_t size;
    std::memcpy(&offset, pairs.data() + 16 * i, 8);
    std::memcpy(&size, pairs.data() + 16 * i + 8, 8);
    if (size > 4096 || offset > 65536) return CUDA_ERROR_INVALID_VALUE;
    fetched.params.emplace_back(offset, size);
    fetched.total = std::max(fetched.total, offset + size);
  }
  std::lock_guard lock(g_layouts_mu);
  layout = &(g_layouts[function] = std::move(fetched));
  return CUDA_SUCCESS;
}

}  // namespace

YONDER_EXPORT CUresult cuLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                                      unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                                      unsigned int block_z, unsigned int shared_bytes, CUstream stream, void** params,
                                      void** extra) {
  std::vector<uint8_t> packed;
  uint32_t form = kLaunchByLayout;
  if (params != nullptr) {
    const Layout* layout = nullptr;
    if (CUresult r = layout_of(function, layout); r != CUDA_SUCCESS) return r;
    packed.assign(layout->total, 0);
    for (size_t i = 0; i < layout->params.size(); ++i) {
      if (params[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
      std::memcpy(packed.data() + layout->params[i].first, params[i], layout->params[i].second);
    }
  } else if (extra != nullptr) {
    // (key, value) pairs to CU_LAUNCH_PARAM_END: the buffer and its size.
    const void* buffer = nullptr;
    const size_t* size = nullptr;
    for (size_t i = 0; extra[i] != launch_key(YONDER_CU_LAUNCH_PARAM_END) && i < 16; i += 2) {
      if (extra[i] == launch_key(YONDER_CU_LAUNCH_PARAM_BUFFER_POINTER)) buffer = extra[i + 1];
      if (extra[i] == launch_key(YONDER_CU_LAUNCH_PARAM_BUFFER_SIZE)) size = static_cast<const size_t*>(extra[i + 1]);
    }
    if (buffer == nullptr || size == nullptr || *size > 65536) return CUDA_ERROR_INVALID_VALUE;
    const auto* bytes = static_cast<const uint8_t*>(buffer);
    packed.assign(bytes, bytes + *size);
    form = kLaunchPackedBuffer;
  }
  return remote_call<Mode::kAsync, InHandle<CUfunction>, In<unsigned int>, In<unsigned int>, In<unsigned int>,
                     In<unsigned int>, In<unsigned int>, In<unsigned int>, In<unsigned int>, InHandle<CUstream>,
                     In<uint32_t>, InBytes<11>, In<uint64_t>>(CallId::ycLaunchKernel, function, grid_x, grid_y, grid_z,
                                                              block_x, block_y, block_z, shared_bytes, stream, form,
                                                              packed.data(), uint64_t{packed.size()});
}

// ---- Answered here ----

namespace {

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {kLinkLost, "CUDA_ERROR_DEVICE_UNAVAILABLE", "the link to the remote GPU is gone"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no remote GPU: run under `yonder cuda`"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {kAlreadyRegistered, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {kNotRegistered, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported by the remote GPU"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* error_text(CUresult code) {
  for (const auto& e : kErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

}  // namespace

YONDER_EXPORT CUresult cuGetErrorName(CUresult error, const char** name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = error_text(error);
  *name = e != nullptr ? e->name : nullptr;
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

YONDER_EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = error_text(error);
  *text = e != nullptr ? e->text : nullptr;
  return e != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// Host memory stays here, where the program is: "pinned" memory is ordinary
// page-aligned memory (the bytes cross a socket either way, so nothing is
// gained by locking it), and registering memory only checks and records it.
// Mapping host memory into the device's address space cannot be done from
// another machine: those flags are CUDA_ERROR_NOT_SUPPORTED.
namespace {
std::mutex g_host_mu;
std::unordered_map<void*, size_t> g_host_allocated;
std::unordered_map<void*, size_t> g_host_registered;
}  // namespace

YONDER_EXPORT CUresult cuMemHostAlloc(void** host, size_t bytes, unsigned int flags) {
  if (host == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & YONDER_CU_MEMHOSTALLOC_DEVICEMAP) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  void* p = nullptr;
  if (::posix_memalign(&p, 4096, bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  std::lock_guard lock(g_host_mu);
  g_host_allocated[p] = bytes;
  *host = p;
  return CUDA_SUCCESS;
}

YONDER_EXPORT CUresult cuMemAllocHost_v2(void** host, size_t bytes) { return cuMemHostAlloc(host, bytes, 0); }

YONDER_EXPORT CUresult cuMemFreeHost(void* host) {
  {
    std::lock_guard lock(g_host_mu);
    if (g_host_allocated.erase(host) == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  std::free(host);
  return CUDA_SUCCESS;
}

YONDER_EXPORT CUresult cuMemHostRegister_v2(void* host, size_t bytes, unsigned int flags) {
  if (host == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & YONDER_CU_MEMHOSTREGISTER_DEVICEMAP) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  std::lock_guard lock(g_host_mu);
  return g_host_registered.emplace(host, bytes).second ? CUDA_SUCCESS : kAlreadyRegistered;
}

YONDER_EXPORT CUresult cuMemHostUnregister(void* host) {
  std::lock_guard lock(g_host_mu);
  return g_host_registered.erase(host) == 1 ? CUDA_SUCCESS : kNotRegistered;
}

// A module from a file: read here (the file is on this machine) and sent
// as cuModuleLoadData sends an image. Text (PTX) gets its terminating NUL.
YONDER_EXPORT CUresult cuModuleLoad(CUmodule* module, const char* path) {
  if (module == nullptr || path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FILE* f = std::fopen(path, "rb");
  if (f == nullptr) return CUDA_ERROR_FILE_NOT_FOUND;
  std::vector<char> image;
  char chunk[65536];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0 && image.size() <= kMaxFrameBytes) {
    image.insert(image.end(), chunk, chunk + n);
  }
  std::fclose(f);
  if (image.empty() || image.size() > kMaxFrameBytes - 64) return CUDA_ERROR_INVALID_IMAGE;
  image.push_back('\0');
  return cuModuleLoadData(module, image.data());
}

// JIT options are not carried: the image loads as with cuModuleLoadData,
// and any log buffers the options name stay as they were.
YONDER_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int, CUjit_option*,
                                          void**) {
  return cuModuleLoadData(module, image);
}

// The deprecated query, from the two attributes that replaced it.
YONDER_EXPORT CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice device) {
  if (major == nullptr || minor == nullptr) return CUDA_ERROR_INVALID_VALUE;
  constexpr auto kMajor = static_cast<CUdevice_attribute>(75);
  constexpr auto kMinor = static_cast<CUdevice_attribute>(76);
  if (CUresult r = cuDeviceGetAttribute(major, kMajor, device); r != CUDA_SUCCESS) return r;
  return cuDeviceGetAttribute(minor, kMinor, device);
}

YONDER_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                                           CUdriverProcAddressQueryResult* status);
YONDER_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);

namespace {

struct Entry {
  const char* name;
  void* fn;
};

// Every function this stand-in exports, by its exported name.
const Entry kEntries[] = {
#define YONDER_REMOTE_ENTRY_kGenerated(name) {#name, reinterpret_cast<void*>(&::name)},
#define YONDER_REMOTE_ENTRY_kWritten(name) {#name, reinterpret_cast<void*>(&::name)},
#define YONDER_REMOTE_ENTRY_kOurs(name)
#define YONDER_REMOTE_ENTRY(id, name, mode, origin, ...) YONDER_REMOTE_ENTRY_##origin(name)
    YONDER_REMOTE_CUDA_CALLS(YONDER_REMOTE_ENTRY)
#undef YONDER_REMOTE_ENTRY
        {"cuCtxGetCurrent", reinterpret_cast<void*>(&cuCtxGetCurrent)},
    {"cuCtxPushCurrent_v2", reinterpret_cast<void*>(&cuCtxPushCurrent_v2)},
    {"cuCtxPopCurrent_v2", reinterpret_cast<void*>(&cuCtxPopCurrent_v2)},
    {"cuMemHostAlloc", reinterpret_cast<void*>(&cuMemHostAlloc)},
    {"cuMemAllocHost_v2", reinterpret_cast<void*>(&cuMemAllocHost_v2)},
    {"cuMemFreeHost", reinterpret_cast<void*>(&cuMemFreeHost)},
    {"cuMemHostRegister_v2", reinterpret_cast<void*>(&cuMemHostRegister_v2)},
    {"cuMemHostUnregister", reinterpret_cast<void*>(&cuMemHostUnregister)},
    {"cuModuleLoad", reinterpret_cast<void*>(&cuModuleLoad)},
    {"cuModuleLoadDataEx", reinterpret_cast<void*>(&cuModuleLoadDataEx)},
    {"cuDeviceComputeCapability", reinterpret_cast<void*>(&cuDeviceComputeCapability)},
    {"cuLaunchKernel", reinterpret_cast<void*>(&cuLaunchKernel)},
    {"cuGetErrorName", reinterpret_cast<void*>(&cuGetErrorName)},
    {"cuGetErrorString", reinterpret_cast<void*>(&cuGetErrorString)},
    {"cuGetProcAddress", reinterpret_cast<void*>(&cuGetProcAddress)},
    {"cuGetProcAddress_v2", reinterpret_cast<void*>(&cuGetProcAddress_v2)},
};

void* find_entry(const std::string& name) {
  for (const auto& e : kEntries) {
    if (name == e.name) return e.fn;
  }
  return nullptr;
}

bool tracing() {
  static const bool on = [] {
    const char* v = std::getenv("YONDER_CUDA_TRACE");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

}  // namespace

// A base name resolves to its versioned entry point the way the driver's
// does: "cuMemAlloc" is cuMemAlloc_v2 for CUDA 3.2 on, "cuGetProcAddress"
// is cuGetProcAddress_v2 for 12.0 on. The per-thread default stream
// variants (_ptsz, _ptds) resolve to the same functions: the worker runs
// every call on one thread, where the two default streams coincide.
// Unknown names are CUDA_ERROR_NOT_FOUND, as on a driver that lacks them,
// so the runtime takes its fallbacks; YONDER_CUDA_TRACE=1 lists them.
YONDER_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t,
                                           CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::string name(symbol);
  void* fn = nullptr;
  if (name == "cuGetProcAddress" && cuda_version >= YONDER_CUDA_PROC_ADDRESS_V2_SINCE) {
    fn = find_entry("cuGetProcAddress_v2");
  }
  if (fn == nullptr && cuda_version >= YONDER_CUDA_V2_SINCE) fn = find_entry(name + "_v2");
  if (fn == nullptr) fn = find_entry(name);
  *pfn = fn;
  if (status != nullptr) *status = fn != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (fn == nullptr && tracing())
    say("%s is not carried to the remote GPU (asked for through cuGetProcAddress)", symbol);
  return fn != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

YONDER_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, nullptr);
}
