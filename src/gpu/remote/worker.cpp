#include "gpu/remote/worker.h"

#include <dlfcn.h>

#include <algorithm>
#include <type_traits>

namespace yonder::gpu::remote {

// Every driver row's parameter kinds must give the driver's own signature.
template <class... P>
using Signature = CUresult (*)(ArgOf<P>...);
#define YONDER_REMOTE_CHECK_kGenerated(name, ...)                   \
  static_assert(std::is_same_v<PFN_##name, Signature<__VA_ARGS__>>, \
                #name ": the table's parameters do not match our declaration of it");
#define YONDER_REMOTE_CHECK_kWritten(name, ...) YONDER_REMOTE_CHECK_kGenerated(name __VA_OPT__(, ) __VA_ARGS__)
#define YONDER_REMOTE_CHECK_kOurs(name, ...)
#define YONDER_REMOTE_CHECK(id, name, mode, origin, ...) YONDER_REMOTE_CHECK_##origin(name __VA_OPT__(, ) __VA_ARGS__)
YONDER_REMOTE_CUDA_CALLS(YONDER_REMOTE_CHECK)
#undef YONDER_REMOTE_CHECK

DriverTable load_driver(void* library) {
  DriverTable table;
  if (library == nullptr) return table;
#define YONDER_REMOTE_LOAD_kGenerated(name) table.name = reinterpret_cast<PFN_##name>(dlsym(library, #name));
#define YONDER_REMOTE_LOAD_kWritten(name) YONDER_REMOTE_LOAD_kGenerated(name)
#define YONDER_REMOTE_LOAD_kOurs(name)
#define YONDER_REMOTE_LOAD(id, name, mode, origin, ...) YONDER_REMOTE_LOAD_##origin(name)
  YONDER_REMOTE_CUDA_CALLS(YONDER_REMOTE_LOAD)
#undef YONDER_REMOTE_LOAD
  table.cuFuncGetParamInfo = reinterpret_cast<PFN_cuFuncGetParamInfo>(dlsym(library, "cuFuncGetParamInfo"));
  table.cuLaunchKernel = reinterpret_cast<PFN_cuLaunchKernel>(dlsym(library, "cuLaunchKernel"));
  return table;
}

CallWorker::CallWorker(const DriverTable& driver, size_t max_handles) : driver_(driver), handles_(max_handles) {}

bool CallWorker::fail(std::string why) {
  error_ = std::move(why);
  return false;
}

void CallWorker::reply_header(Writer& w, CUresult result) {
  w.put(static_cast<int32_t>(result));
  w.put(deferred_call_);
  w.put(static_cast<int32_t>(deferred_result_));
  deferred_call_ = 0;
  deferred_result_ = CUDA_SUCCESS;
}

bool CallWorker::hello(Reader& r, std::vector<uint8_t>& out) {
  uint32_t magic = 0;
  uint16_t version = 0;
  bool decoded = r.take(magic) && r.take(version) && r.at_end();
  size_t at = begin_frame(out);
  Writer w(out);
  CUresult refusal = CUDA_SUCCESS;
  if (!decoded || magic != kHelloMagic) {
    refusal = static_cast<CUresult>(HelloRefusal::kBadMagic);
  } else if (version != kProtocolVersion) {
    refusal = static_cast<CUresult>(HelloRefusal::kVersion);
  }
  reply_header(w, refusal);
  w.put(kProtocolVersion);
  w.put(kMaxFrameBytes);
  finish_frame(out, at);
  if (refusal == static_cast<CUresult>(HelloRefusal::kBadMagic)) return fail("the client did not open with a hello");
  if (refusal != CUDA_SUCCESS) {
    return fail("the client speaks version " + std::to_string(version) + " of the call protocol, this worker " +
                std::to_string(kProtocolVersion) + ": install the same Yonder release on both machines");
  }
  greeted_ = true;
  return true;
}

template <Mode M, class... P, class Fn>
bool CallWorker::run(Reader& r, CallId id, Fn fn, std::vector<uint8_t>& out) {
  worker::Slots<P...> slots;
  worker::Check check = worker::decode<P...>(r, handles_, slots);
  if (check == worker::Check::kMalformed) {
    return fail(std::string("a malformed ") + find_call(static_cast<uint16_t>(id))->name + " request");
  }
  CUresult result = check == worker::Check::kBadHandle  ? CUDA_ERROR_INVALID_HANDLE
                    : check == worker::Check::kBadValue ? CUDA_ERROR_INVALID_VALUE
                                                        : CUDA_SUCCESS;
  if (result == CUDA_SUCCESS) {
    if constexpr (std::is_pointer_v<Fn>) {
      result = fn == nullptr ? CUDA_ERROR_NOT_SUPPORTED : worker::call<P...>(slots, fn);
    } else {
      result = worker::call<P...>(slots, fn);
    }
  }
  ++calls_;
  if constexpr (M == Mode::kAsync) {
    if (result == CUDA_SUCCESS) {
      worker::commit<P...>(slots, handles_, nullptr);
    } else if (deferred_result_ == CUDA_SUCCESS) {
      deferred_call_ = static_cast<uint16_t>(id);
      deferred_result_ = result;
    }
    return true;
  }
  size_t at = begin_frame(out);
  Writer w(out);
  reply_header(w, result);
  if (result == CUDA_SUCCESS) worker::commit<P...>(slots, handles_, &w);
  finish_frame(out, at);
  return true;
}

bool CallWorker::handle(const uint8_t* body, size_t size, std::vector<uint8_t>& out) {
  Reader r(body, size);
  uint16_t id = 0;
  if (!r.take(id)) return fail("a request without a call");
  if (id == static_cast<uint16_t>(CallId::kHello)) {
    if (greeted_) return fail("a second hello");
    return hello(r, out);
  }
  if (!greeted_) return fail("a call before the hello");
  // A module's functions go with it, and so do their layouts.
  if (id == static_cast<uint16_t>(CallId::cuModuleUnload)) layouts_.clear();
  switch (static_cast<CallId>(id)) {
#define YONDER_REMOTE_TARGET_kGenerated(name) driver_.name
#define YONDER_REMOTE_TARGET_kWritten(name) driver_.name
#define YONDER_REMOTE_TARGET_kOurs(name) [this](auto... a) { return name(a...); }
#define YONDER_REMOTE_CASE(id, name, mode, origin, ...) \
  case CallId::name:                                    \
    return run<Mode::mode __VA_OPT__(, ) __VA_ARGS__>(r, CallId::name, YONDER_REMOTE_TARGET_##origin(name), out);
    YONDER_REMOTE_CUDA_CALLS(YONDER_REMOTE_CASE)
#undef YONDER_REMOTE_CASE
    default: break;
  }
  return fail("call " + std::to_string(id) + ", which version " + std::to_string(kProtocolVersion) +
              " of the call protocol does not have");
}

CUresult CallWorker::layout_of(CUfunction function, const std::vector<std::pair<uint64_t, uint64_t>>*& layout) {
  auto it = layouts_.find(function);
  if (it == layouts_.end()) {
    if (driver_.cuFuncGetParamInfo == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
    std::vector<std::pair<uint64_t, uint64_t>> params;
    for (size_t i = 0; i < kMaxKernelParams; ++i) {
      size_t offset = 0;
      size_t bytes = 0;
      // The driver answers CUDA_ERROR_INVALID_VALUE past the last parameter.
      if (driver_.cuFuncGetParamInfo(function, i, &offset, &bytes) != CUDA_SUCCESS) break;
      params.emplace_back(offset, bytes);
    }
    it = layouts_.emplace(function, std::move(params)).first;
  }
  layout = &it->second;
  return CUDA_SUCCESS;
}

CUresult CallWorker::ycFuncParamLayout(CUfunction function, uint32_t* count, void* pairs, uint64_t capacity) {
  const std::vector<std::pair<uint64_t, uint64_t>>* layout = nullptr;
  if (CUresult r = layout_of(function, layout); r != CUDA_SUCCESS) return r;
  if (layout->size() * 16 > capacity) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<uint32_t>(layout->size());
  auto* out = static_cast<uint8_t*>(pairs);
  for (const auto& [offset, bytes] : *layout) {
    std::memcpy(out, &offset, 8);
    std::memcpy(out + 8, &bytes, 8);
    out += 16;
  }
  return CUDA_SUCCESS;
}

CUresult CallWorker::ycLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                                    unsigned int block_x, unsigned int block_y, unsigned int block_z,
                                    unsigned int shared_bytes, CUstream stream, uint32_t form, const void* args,
                                    uint64_t size) {
  if (driver_.cuLaunchKernel == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  const std::vector<std::pair<uint64_t, uint64_t>>* layout = nullptr;
  if (CUresult r = layout_of(function, layout); r != CUDA_SUCCESS) return r;
  uint64_t total = 0;
  for (const auto& [offset, bytes] : *layout) total = std::max(total, offset + bytes);
  // The driver reads each parameter at its offset for its size: the bytes
  // sent must cover the whole layout, no more, or it would read past them.
  if (size != total) return CUDA_ERROR_INVALID_VALUE;
  auto* base = const_cast<uint8_t*>(static_cast<const uint8_t*>(args));
  if (form == kLaunchByLayout) {
    std::vector<void*> params;
    params.reserve(layout->size());
    for (const auto& entry : *layout) params.push_back(base + entry.first);
    return driver_.cuLaunchKernel(function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, stream,
                                  params.data(), nullptr);
  }
  if (form == kLaunchPackedBuffer) {
    size_t bytes = static_cast<size_t>(size);
    void* extra[] = {launch_key(YONDER_CU_LAUNCH_PARAM_BUFFER_POINTER), base,
                     launch_key(YONDER_CU_LAUNCH_PARAM_BUFFER_SIZE), &bytes, launch_key(YONDER_CU_LAUNCH_PARAM_END)};
    return driver_.cuLaunchKernel(function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, stream,
                                  nullptr, extra);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace yonder::gpu::remote
