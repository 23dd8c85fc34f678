// Fuzzes the remote-CUDA worker with what a hostile client can send: after
// the hello, a sequence of requests (input: u16 length, then that many
// bytes of request, repeated), executed on the driver's TEST DOUBLE
// (dlopen'd; it checks device ranges and handles as the driver does). The
// worker must never crash, never hand the driver a handle it did not give
// out (the double would refuse it, but a crash in it means a forged
// pointer reached it), answer every synchronous call with a well-formed
// reply, and end the session only with a reason.
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu/remote/call_codec.h"
#include "gpu/remote/worker.h"

using namespace yonder::gpu::remote;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static void* library = dlopen(YONDER_FAKE_CUDA_DIR "/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) __builtin_trap();
  static const DriverTable driver = load_driver(library);
  CallWorker worker(driver, 256);
  std::vector<uint8_t> hello;
  encode_hello(hello);
  std::vector<uint8_t> out;
  if (!worker.handle(hello.data() + 4, hello.size() - 4, out)) __builtin_trap();
  size_t at = 0;
  while (size - at >= 2) {
    uint16_t length;
    std::memcpy(&length, data + at, 2);
    at += 2;
    if (length > size - at) length = static_cast<uint16_t>(size - at);
    // A copy of exactly the request, so a read past it is caught.
    std::vector<uint8_t> request(data + at, data + at + length);
    at += length;
    out.clear();
    bool go_on = worker.handle(request.data(), request.size(), out);
    if (!go_on) {
      if (worker.error().empty()) __builtin_trap();
      break;
    }
    // Every reply is one whole frame with its fixed part.
    if (!out.empty()) {
      int64_t body = complete_frame(out.data(), out.size());
      if (body < static_cast<int64_t>(kReplyHeaderBytes) || static_cast<size_t>(body) + 4 != out.size())
        __builtin_trap();
    }
  }
  return 0;
}
