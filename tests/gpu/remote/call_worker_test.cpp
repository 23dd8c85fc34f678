// The call protocol's pure parts (module image lengths, the handle table,
// the call table) and the worker in process: requests made with the
// client's encoders, answered by a CallWorker on the driver's TEST DOUBLE
// (tests/gpu/vram_guard/fake_libcuda.c, dlopen'd), replies read with the
// client's decoders. What a hostile client can send is here: a bad handle,
// a buffer whose length disagrees with its parameter, a launch whose
// arguments do not cover the kernel's layout, a truncated request, a call
// before the hello, another version.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "gpu/remote/call_codec.h"
#include "gpu/remote/call_table.h"
#include "gpu/remote/worker.h"

namespace yonder::gpu::remote {
namespace {

// ---- Pure parts ----

TEST(ModuleImage, TextCountsItsNulAndMustHaveOne) {
  const char ptx[] = ".version 8.0\n.entry k()\n{ ret; }";
  EXPECT_EQ(module_image_bytes(ptx, sizeof ptx), sizeof ptx);
  EXPECT_EQ(module_image_bytes(ptx, sizeof ptx - 1), 0u);  // no NUL within the limit
}

TEST(ModuleImage, AFatbinIsItsHeaderPlusTheSizeItDeclares) {
  std::vector<uint8_t> fatbin(16 + 100, 0xab);
  uint32_t magic = 0xBA55ED50;
  uint16_t version = 1;
  uint16_t header = 16;
  uint64_t body = 100;
  std::memcpy(fatbin.data(), &magic, 4);
  std::memcpy(fatbin.data() + 4, &version, 2);
  std::memcpy(fatbin.data() + 6, &header, 2);
  std::memcpy(fatbin.data() + 8, &body, 8);
  EXPECT_EQ(module_image_bytes(fatbin.data(), fatbin.size()), 116u);
  EXPECT_EQ(module_image_bytes(fatbin.data(), 115), 0u);  // declares more than there is
  body = UINT64_MAX - 8;
  std::memcpy(fatbin.data() + 8, &body, 8);
  EXPECT_EQ(module_image_bytes(fatbin.data(), fatbin.size()), 0u);  // no overflow
}

TEST(ModuleImage, AnElfCubinEndsWithItsSectionTable) {
  std::vector<uint8_t> elf(512, 0);
  std::memcpy(elf.data(),
              "\x7f"
              "ELF",
              4);
  elf[4] = 2;  // 64-bit
  uint64_t shoff = 256;
  uint16_t shentsize = 64;
  uint16_t shnum = 4;
  std::memcpy(elf.data() + 0x28, &shoff, 8);
  std::memcpy(elf.data() + 0x3A, &shentsize, 2);
  std::memcpy(elf.data() + 0x3C, &shnum, 2);
  EXPECT_EQ(module_image_bytes(elf.data(), elf.size()), 512u);
  EXPECT_EQ(module_image_bytes(elf.data(), 511), 0u);
}

TEST(HandleTable, IdsAreOfOneKindAndGoWithTheirParent) {
  HandleTable table(3);
  int a = 0;
  int b = 0;
  uint64_t module = table.add(HandleKind::kModule, &a, 0);
  uint64_t function = table.add(HandleKind::kFunction, &b, module);
  void* out = nullptr;
  EXPECT_TRUE(table.lookup(HandleKind::kFunction, function, out));
  EXPECT_EQ(out, &b);
  EXPECT_FALSE(table.lookup(HandleKind::kStream, function, out));  // another kind
  EXPECT_FALSE(table.lookup(HandleKind::kModule, 0x9999, out));    // never handed out
  // The null handle and the two stream values that are not handles.
  EXPECT_TRUE(table.lookup(HandleKind::kEvent, 0, out));
  EXPECT_EQ(out, nullptr);
  EXPECT_TRUE(table.lookup(HandleKind::kStream, 2, out));
  EXPECT_FALSE(table.lookup(HandleKind::kEvent, 2, out));
  table.drop(module);
  EXPECT_FALSE(table.lookup(HandleKind::kFunction, function, out));
  EXPECT_EQ(table.size(), 0u);
}

TEST(CallTable, IdsAndNamesAreUniqueAndDriverRowsKeepTheDriversNames) {
  size_t count = 0;
  const CallInfo* calls = all_calls(count);
  ASSERT_GT(count, 30u);
  for (size_t i = 0; i < count; ++i) {
    EXPECT_EQ(find_call(calls[i].id), &calls[i]) << calls[i].name;
    EXPECT_EQ(find_call(calls[i].name), &calls[i]) << calls[i].name;
    bool ours = calls[i].origin == Origin::kOurs;
    EXPECT_EQ(std::strncmp(calls[i].name, "yc", 2) == 0, ours) << calls[i].name;
  }
  EXPECT_EQ(find_call(uint16_t{0}), nullptr);  // the hello is not a call
}

TEST(CallTable, TheReadmesCoverageTableNamesEveryCall) {
  std::ifstream in(YONDER_REMOTE_README);
  std::string readme((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(readme.empty());
  size_t count = 0;
  const CallInfo* calls = all_calls(count);
  for (size_t i = 0; i < count; ++i) {
    EXPECT_NE(readme.find(std::string("`") + calls[i].name + "`"), std::string::npos)
        << calls[i].name << " is carried but not in src/gpu/remote/README.md's coverage table";
  }
}

// ---- The worker on the test double ----

class Worker : public ::testing::Test {
 protected:
  void SetUp() override {
    library_ = dlopen(YONDER_FAKE_CUDA_DIR "/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library_, nullptr) << dlerror();
    worker_ = std::make_unique<CallWorker>(load_driver(library_));
    std::vector<uint8_t> hello;
    encode_hello(hello);
    std::vector<uint8_t> reply;
    ASSERT_TRUE(worker_->handle(hello.data() + 4, hello.size() - 4, reply)) << worker_->error();
    ASSERT_EQ(reply.size(), 4 + kReplyHeaderBytes + 2 + 4);
  }

  // Sends one call; for a synchronous one, returns the result and fills the
  // outputs, with the deferred pair in last_deferred_.
  template <Mode M, class... P>
  CUresult call(CallId id, ArgOf<P>... a) {
    std::tuple<ArgOf<P>...> args(a...);
    std::vector<uint8_t> request;
    client::encode_request<P...>(request, id, args);
    std::vector<uint8_t> reply;
    if (!worker_->handle(request.data() + 4, request.size() - 4, reply)) return -1;
    if constexpr (M == Mode::kAsync) {
      EXPECT_TRUE(reply.empty());
      return CUDA_SUCCESS;
    } else {
      Reader r(reply.data() + 4, reply.size() - 4);
      int32_t result = 0;
      EXPECT_TRUE(r.take(result) && r.take(last_deferred_call_) && r.take(last_deferred_));
      if (result == CUDA_SUCCESS) {
        EXPECT_TRUE(client::decode_outputs<P...>(r, args));
      }
      return result;
    }
  }

  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ((call<Mode::kSync, Out<CUdeviceptr>, In<size_t>>(CallId::cuMemAlloc_v2, &p, bytes)), CUDA_SUCCESS);
    return p;
  }

  CUfunction kernel(const char* name) {
    static const char image[] = "yonder-test-module";
    CUmodule module = nullptr;
    CUfunction f = nullptr;
    EXPECT_EQ((call<Mode::kSync, OutHandle<CUmodule>, InImage>(CallId::cuModuleLoadData, &module, image)),
              CUDA_SUCCESS);
    EXPECT_EQ((call<Mode::kSync, OutFunctionOfModule, InHandle<CUmodule>, InName>(CallId::cuModuleGetFunction, &f,
                                                                                  module, name)),
              CUDA_SUCCESS);
    return f;
  }

  void* library_ = nullptr;
  std::unique_ptr<CallWorker> worker_;
  uint16_t last_deferred_call_ = 0;
  int32_t last_deferred_ = 0;
};

TEST_F(Worker, CopiesReachTheDriverAndComeBackIntact) {
  CUdeviceptr p = alloc(64);
  const char text[] = "the bytes a consumer sent";
  EXPECT_EQ(
      (call<Mode::kAsync, In<CUdeviceptr>, InBytes<2>, In<size_t>>(CallId::cuMemcpyHtoD_v2, p, text, sizeof text)),
      CUDA_SUCCESS);
  char back[sizeof text] = {};
  EXPECT_EQ(
      (call<Mode::kSync, OutBytes<2>, In<CUdeviceptr>, In<size_t>>(CallId::cuMemcpyDtoH_v2, back, p, sizeof back)),
      CUDA_SUCCESS);
  EXPECT_STREQ(back, text);
}

TEST_F(Worker, HandlesAreIdsOfThisSessionAndForgedOnesNeverReachTheDriver) {
  CUstream stream = nullptr;
  ASSERT_EQ((call<Mode::kSync, OutHandle<CUstream>, In<unsigned int>>(CallId::cuStreamCreate, &stream, 0u)),
            CUDA_SUCCESS);
  EXPECT_GE(handle_id(stream), 0x1000u);  // an id, not the driver's pointer
  EXPECT_EQ((call<Mode::kSync, InHandle<CUstream>>(CallId::cuStreamSynchronize, stream)), CUDA_SUCCESS);
  EXPECT_EQ((call<Mode::kSync, InHandle<CUstream>>(CallId::cuStreamSynchronize, handle_from_id<CUstream>(0x77777))),
            CUDA_ERROR_INVALID_HANDLE);
  // Destroyed, the id is gone: using it again cannot reach freed memory.
  EXPECT_EQ((call<Mode::kAsync, DropHandle<CUstream>>(CallId::cuStreamDestroy_v2, stream)), CUDA_SUCCESS);
  EXPECT_EQ((call<Mode::kSync, InHandle<CUstream>>(CallId::cuStreamSynchronize, stream)), CUDA_ERROR_INVALID_HANDLE);
  // An event's id is not a stream.
  CUevent event = nullptr;
  ASSERT_EQ((call<Mode::kSync, OutHandle<CUevent>, In<unsigned int>>(CallId::cuEventCreate, &event, 0u)), CUDA_SUCCESS);
  EXPECT_EQ(
      (call<Mode::kSync, InHandle<CUstream>>(CallId::cuStreamSynchronize, handle_from_id<CUstream>(handle_id(event)))),
      CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(Worker, ABufferWhoseLengthDisagreesWithItsParameterIsRefused) {
  CUdeviceptr p = alloc(64);
  // Encoded by hand: 8 bytes sent, the length parameter says 64.
  std::vector<uint8_t> request;
  size_t at = begin_frame(request);
  Writer w(request);
  w.put(static_cast<uint16_t>(CallId::cuMemcpyHtoD_v2));
  w.put(p);
  w.put(uint64_t{8});
  w.put(uint64_t{0x1122334455667788});
  w.put(size_t{64});
  finish_frame(request, at);
  std::vector<uint8_t> reply;
  ASSERT_TRUE(worker_->handle(request.data() + 4, request.size() - 4, reply));
  // Not answered (fire-and-forget); the next reply carries the refusal.
  EXPECT_TRUE(reply.empty());
  int count = 0;
  EXPECT_EQ((call<Mode::kSync, Out<int>>(CallId::cuDeviceGetCount, &count)), CUDA_SUCCESS);
  EXPECT_EQ(last_deferred_, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(last_deferred_call_, static_cast<uint16_t>(CallId::cuMemcpyHtoD_v2));
}

TEST_F(Worker, ALaunchMustCoverTheKernelsLayoutExactly) {
  CUfunction add_one = kernel("add_one");
  uint32_t count = 0;
  std::vector<uint8_t> pairs(16 * 8);
  ASSERT_EQ((call<Mode::kSync, InHandle<CUfunction>, Out<uint32_t>, OutBytes<3>, In<uint64_t>>(
                CallId::ycFuncParamLayout, add_one, &count, pairs.data(), uint64_t{pairs.size()})),
            CUDA_SUCCESS);
  ASSERT_EQ(count, 2u);  // (float* data @0, 8), (unsigned n @8, 4)
  uint64_t second_offset = 0;
  std::memcpy(&second_offset, pairs.data() + 16, 8);
  EXPECT_EQ(second_offset, 8u);

  CUdeviceptr p = alloc(4 * sizeof(float));
  std::vector<uint8_t> args(12);
  std::memcpy(args.data(), &p, 8);
  uint32_t n = 4;
  std::memcpy(args.data() + 8, &n, 4);
  auto launch = [&](const std::vector<uint8_t>& bytes) {
    return call<Mode::kAsync, InHandle<CUfunction>, In<unsigned int>, In<unsigned int>, In<unsigned int>,
                In<unsigned int>, In<unsigned int>, In<unsigned int>, In<unsigned int>, InHandle<CUstream>,
                In<uint32_t>, InBytes<11>, In<uint64_t>>(CallId::ycLaunchKernel, add_one, 1u, 1u, 1u, 4u, 1u, 1u, 0u,
                                                         nullptr, kLaunchByLayout, bytes.data(),
                                                         uint64_t{bytes.size()});
  };
  launch(args);
  float values[4] = {};
  // Each reply carries the first failure since the last one: none yet.
  ASSERT_EQ(
      (call<Mode::kSync, OutBytes<2>, In<CUdeviceptr>, In<size_t>>(CallId::cuMemcpyDtoH_v2, values, p, sizeof values)),
      CUDA_SUCCESS);
  EXPECT_EQ(last_deferred_, CUDA_SUCCESS);
  EXPECT_EQ(values[3], 1.0f);
  // Short by one byte: the driver would read past what was sent.
  args.pop_back();
  launch(args);
  int devices = 0;
  EXPECT_EQ((call<Mode::kSync, Out<int>>(CallId::cuDeviceGetCount, &devices)), CUDA_SUCCESS);
  EXPECT_EQ(last_deferred_, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(last_deferred_call_, static_cast<uint16_t>(CallId::ycLaunchKernel));
}

TEST_F(Worker, AnImageWithoutItsEndIsRefused) {
  std::vector<uint8_t> request;
  size_t at = begin_frame(request);
  Writer w(request);
  w.put(static_cast<uint16_t>(CallId::cuModuleLoadData));
  const char text[] = "yonder-test-module";  // sent without its NUL
  w.put(static_cast<uint32_t>(sizeof text - 1));
  w.put_bytes(text, sizeof text - 1);
  finish_frame(request, at);
  std::vector<uint8_t> reply;
  ASSERT_TRUE(worker_->handle(request.data() + 4, request.size() - 4, reply));
  Reader r(reply.data() + 4, reply.size() - 4);
  int32_t result = 0;
  ASSERT_TRUE(r.take(result));
  EXPECT_EQ(result, CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Worker, ATruncatedRequestOrAnUnknownCallEndsTheSession) {
  std::vector<uint8_t> request;
  CUdeviceptr p = 0;
  auto args = std::make_tuple(&p, size_t{64});
  client::encode_request<Out<CUdeviceptr>, In<size_t>>(request, CallId::cuMemAlloc_v2, args);
  std::vector<uint8_t> reply;
  EXPECT_FALSE(worker_->handle(request.data() + 4, request.size() - 5, reply));
  EXPECT_EQ(worker_->error(), "a malformed cuMemAlloc_v2 request");
  EXPECT_TRUE(reply.empty());

  CallWorker fresh(load_driver(library_));
  uint16_t unknown = 9999;
  EXPECT_FALSE(fresh.handle(reinterpret_cast<const uint8_t*>(&unknown), 2, reply));
  EXPECT_EQ(fresh.error(), "a call before the hello");
}

TEST(WorkerHello, AnotherVersionIsAnsweredWithOursAndTheSessionEnds) {
  CallWorker worker(DriverTable{});
  std::vector<uint8_t> hello;
  encode_hello(hello, static_cast<uint16_t>(kProtocolVersion + 1));
  std::vector<uint8_t> reply;
  EXPECT_FALSE(worker.handle(hello.data() + 4, hello.size() - 4, reply));
  EXPECT_NE(worker.error().find("install the same Yonder release on both machines"), std::string::npos);
  Reader r(reply.data() + 4, reply.size() - 4);
  int32_t result = 0;
  uint16_t call = 0;
  int32_t deferred = 0;
  uint16_t version = 0;
  ASSERT_TRUE(r.take(result) && r.take(call) && r.take(deferred) && r.take(version));
  EXPECT_EQ(result, static_cast<int32_t>(HelloRefusal::kVersion));
  EXPECT_EQ(version, kProtocolVersion);
}

TEST(WorkerHello, ADriverWithoutACallAnswersNotSupported) {
  CallWorker worker(DriverTable{});
  std::vector<uint8_t> frame;
  encode_hello(frame);
  std::vector<uint8_t> reply;
  ASSERT_TRUE(worker.handle(frame.data() + 4, frame.size() - 4, reply));
  frame.clear();
  Writer w(frame);
  reply.clear();
  w.put(static_cast<uint16_t>(CallId::cuInit));
  w.put(0u);
  ASSERT_TRUE(worker.handle(frame.data(), frame.size(), reply));
  Reader r(reply.data() + 4, reply.size() - 4);
  int32_t result = 0;
  ASSERT_TRUE(r.take(result));
  EXPECT_EQ(result, CUDA_ERROR_NOT_SUPPORTED);
}

}  // namespace
}  // namespace yonder::gpu::remote
