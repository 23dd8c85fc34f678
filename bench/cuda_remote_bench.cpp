// The cost of remoting CUDA driver calls, side by side in one run:
//   local:  this process calls the driver's TEST DOUBLE directly (dlopen'd)
//   remote: this process calls the stand-in libcuda.so.1, which sends each
//           call over a unix socket to yonder-cuda-worker (another process)
//           running the same test double
// So the difference is the remoting itself: encoding, the socket, the
// worker's decoding and dispatch, and (for synchronous calls) a round trip
// with two context switches. Three figures, A B A B over --pairs pairs:
//   - tiny synchronous calls (cuDeviceGetCount): calls per second, and the
//     round trip against the socket's own (a byte each way between two
//     processes)
//   - fire-and-forget launches (cuLaunchKernel of a one-element kernel,
//     then one cuCtxSynchronize): launches per second
//   - copies (cuMemcpyHtoD_v2, then cuMemcpyDtoH_v2, --bytes each): MB/s,
//     against the socket's own throughput (a thread reading and discarding
//     what another writes through a unix socket pair) as the anchor
// The goals (not tests): launches >= 50k/s on loopback; copies >=
// 0.5x the link's own throughput. The unix socket stands in for the link
// until sessions ride the peer link; injected RTT (tc netem) applies then.
// With --driver=libcuda.so.1 on a GPU machine, both sides use the real
// driver instead (the kernels are PTX; scripts/gpu-check.sh).
// Usage: cuda_remote_bench [--calls=20000] [--launches=200000] [--bytes=256M] [--pairs=3] [--driver=PATH]
#include <dlfcn.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu/cuda/driver_api.h"
#include "gpu/remote/test_kernels_ptx.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Driver {
  void* library = nullptr;
  PFN_cuInit init = nullptr;
  PFN_cuDeviceGetCount device_count = nullptr;
  PFN_cuDevicePrimaryCtxRetain retain = nullptr;
  PFN_cuCtxSetCurrent set_current = nullptr;
  PFN_cuCtxSynchronize synchronize = nullptr;
  PFN_cuMemAlloc_v2 alloc = nullptr;
  PFN_cuMemFree_v2 free = nullptr;
  PFN_cuMemcpyHtoD_v2 to_device = nullptr;
  PFN_cuMemcpyDtoH_v2 to_host = nullptr;
  PFN_cuModuleLoadData load = nullptr;
  PFN_cuModuleGetFunction function = nullptr;
  PFN_cuLaunchKernel launch = nullptr;

  template <class F>
  void get(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(library, name));
    if (f == nullptr) {
      std::fprintf(stderr, "%s lacks %s\n", name, dlerror());
      std::exit(1);
    }
  }
  explicit Driver(const std::string& path) {
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), dlerror());
      std::exit(1);
    }
    get(init, "cuInit");
    get(device_count, "cuDeviceGetCount");
    get(retain, "cuDevicePrimaryCtxRetain");
    get(set_current, "cuCtxSetCurrent");
    get(synchronize, "cuCtxSynchronize");
    get(alloc, "cuMemAlloc_v2");
    get(free, "cuMemFree_v2");
    get(to_device, "cuMemcpyHtoD_v2");
    get(to_host, "cuMemcpyDtoH_v2");
    get(load, "cuModuleLoadData");
    get(function, "cuModuleGetFunction");
    get(launch, "cuLaunchKernel");
    CUcontext ctx = nullptr;
    must(init(0), "cuInit");
    must(retain(&ctx, 0), "cuDevicePrimaryCtxRetain");
    must(set_current(ctx), "cuCtxSetCurrent");
  }
  static void must(CUresult r, const char* what) {
    if (r != CUDA_SUCCESS) {
      std::fprintf(stderr, "%s failed: %d\n", what, r);
      std::exit(1);
    }
  }
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double calls_per_second(Driver& d, long calls) {
  int count = 0;
  auto start = Clock::now();
  for (long i = 0; i < calls; ++i) Driver::must(d.device_count(&count), "cuDeviceGetCount");
  return static_cast<double>(calls) / seconds_since(start);
}

double launches_per_second(Driver& d, long launches) {
  CUmodule module = nullptr;
  CUfunction add_one = nullptr;
  CUdeviceptr data = 0;
  Driver::must(d.load(&module, kTestKernelsPtx), "cuModuleLoadData");
  Driver::must(d.function(&add_one, module, "add_one"), "cuModuleGetFunction");
  Driver::must(d.alloc(&data, 4), "cuMemAlloc_v2");
  unsigned int n = 1;
  void* args[] = {&data, &n};
  auto start = Clock::now();
  for (long i = 0; i < launches; ++i) {
    Driver::must(d.launch(add_one, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel");
  }
  Driver::must(d.synchronize(), "cuCtxSynchronize");
  double rate = static_cast<double>(launches) / seconds_since(start);
  d.free(data);
  return rate;
}

// MB/s of one copy each way of `bytes`, between buffers already touched
// (the test double's device memory is host memory mapped on demand: its
// first touch costs page faults a GPU's memory does not).
struct CopyBuffers {
  std::vector<unsigned char> host;
  CUdeviceptr dev = 0;
};
double copy_mb_per_second(Driver& d, CopyBuffers& b, size_t bytes) {
  if (b.dev == 0) {
    b.host.assign(bytes, 7);
    Driver::must(d.alloc(&b.dev, bytes), "cuMemAlloc_v2");
    Driver::must(d.to_device(b.dev, b.host.data(), bytes), "cuMemcpyHtoD_v2");
  }
  auto start = Clock::now();
  Driver::must(d.to_device(b.dev, b.host.data(), bytes), "cuMemcpyHtoD_v2");
  Driver::must(d.to_host(b.host.data(), b.dev, bytes), "cuMemcpyDtoH_v2");
  return 2.0 * static_cast<double>(bytes) / 1e6 / seconds_since(start);
}

// The socket's own throughput: one thread writes `bytes` into a unix
// socket pair, another reads and discards them.
double socket_mb_per_second(size_t bytes) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) std::exit(1);
  std::thread reader([&] {
    std::vector<char> buf(256 * 1024);
    size_t got = 0;
    while (got < bytes) {
      ssize_t n = ::read(fds[1], buf.data(), buf.size());
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
  });
  std::vector<char> chunk(1 << 20, 1);
  auto start = Clock::now();
  size_t sent = 0;
  while (sent < bytes) {
    ssize_t n = ::write(fds[0], chunk.data(), std::min(chunk.size(), bytes - sent));
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  reader.join();
  double s = seconds_since(start);
  ::close(fds[0]);
  ::close(fds[1]);
  return static_cast<double>(bytes) / 1e6 / s;
}

// The socket's own round trip: a byte each way between two processes (the
// worker is another process too), microseconds.
double socket_ping_us(long rounds) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) std::exit(1);
  pid_t echo = ::fork();
  if (echo == 0) {
    ::close(fds[0]);
    char c;
    while (::read(fds[1], &c, 1) == 1 && ::write(fds[1], &c, 1) == 1) {
    }
    _exit(0);
  }
  char c = 'x';
  auto start = Clock::now();
  for (long i = 0; i < rounds; ++i) {
    if (::write(fds[0], &c, 1) != 1 || ::read(fds[0], &c, 1) != 1) std::exit(1);
  }
  double us = seconds_since(start) * 1e6 / static_cast<double>(rounds);
  ::close(fds[0]);
  ::close(fds[1]);
  ::waitpid(echo, nullptr, 0);
  return us;
}

std::string text_flag(int argc, char** argv, const char* name, const std::string& fallback) {
  std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  return fallback;
}

long flag(int argc, char** argv, const char* name, long fallback) {
  std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      std::string v = argv[i] + prefix.size();
      long scale = 1;
      if (!v.empty() && (v.back() == 'M' || v.back() == 'K')) {
        scale = v.back() == 'M' ? (1L << 20) : (1L << 10);
        v.pop_back();
      }
      return std::atol(v.c_str()) * scale;
    }
  }
  return fallback;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  long calls = flag(argc, argv, "calls", 20000);
  long launches = flag(argc, argv, "launches", 200000);
  auto bytes = static_cast<size_t>(flag(argc, argv, "bytes", 256L << 20));
  long pairs = flag(argc, argv, "pairs", 3);
  std::string driver = text_flag(argc, argv, "driver", std::string(YONDER_FAKE_CUDA_DIR) + "/libcuda.so.1");

  // The worker, on the test double, in a process of its own.
  std::string socket = "/tmp/yonder-cuda-bench-" + std::to_string(::getpid()) + ".sock";
  pid_t worker = ::fork();
  if (worker == 0) {
    ::execl(YONDER_CUDA_WORKER_PATH, YONDER_CUDA_WORKER_PATH, "--listen", socket.c_str(), "--driver", driver.c_str(),
            static_cast<char*>(nullptr));
    _exit(127);
  }
  struct stat st {};
  for (int i = 0; i < 500 && ::stat(socket.c_str(), &st) != 0; ++i) ::usleep(10000);  // a bench, not a test
  ::setenv("YONDER_CUDA_SOCKET", socket.c_str(), 1);
  Driver local(driver);
  Driver remote(std::string(YONDER_CUDA_STANDIN_DIR) + "/libcuda.so.1");

  std::printf("remote CUDA over a unix socket vs the same driver in process (%s), %ld pairs\n", driver.c_str(), pairs);
  std::printf("%-5s %14s %14s %7s %14s %14s %7s %11s %11s %11s %7s\n", "pair", "local calls/s", "remote calls/s",
              "ratio", "local launch/s", "remote launch/s", "ratio", "local MB/s", "socket MB/s", "remote MB/s",
              "/socket");
  CopyBuffers local_buffers;
  CopyBuffers remote_buffers;
  std::vector<double> call_ratios, launch_ratios, copy_ratios, remote_calls, remote_launches, copies, pings,
      ping_ratios;
  for (long p = 0; p < pairs; ++p) {
    double lc = calls_per_second(local, calls);
    double rc = calls_per_second(remote, calls);
    double ll = launches_per_second(local, launches);
    double rl = launches_per_second(remote, launches);
    double sock = socket_mb_per_second(bytes);
    double local_copy = copy_mb_per_second(local, local_buffers, bytes);
    double copy = copy_mb_per_second(remote, remote_buffers, bytes);
    double ping = socket_ping_us(calls);
    pings.push_back(ping);
    ping_ratios.push_back(1e6 / rc / ping);
    call_ratios.push_back(rc / lc);
    launch_ratios.push_back(rl / ll);
    copy_ratios.push_back(copy / sock);
    remote_calls.push_back(rc);
    remote_launches.push_back(rl);
    copies.push_back(copy);
    std::printf("%-5ld %14.0f %14.0f %7.3f %14.0f %14.0f %7.3f %11.0f %11.0f %11.0f %7.2f\n", p + 1, lc, rc, rc / lc,
                ll, rl, rl / ll, local_copy, sock, copy, copy / sock);
  }
  std::printf(
      "synchronous round trip: median %.1f us (%.0f calls/s; %.4f of in-process), %.2fx the socket's own "
      "round trip of %.1f us (goal <= 2)\n",
      1e6 / median(remote_calls), median(remote_calls), median(call_ratios), median(ping_ratios), median(pings));
  std::printf("fire-and-forget launches: median %.0f /s (goal >= 50000; %.3f of in-process)\n", median(remote_launches),
              median(launch_ratios));
  std::printf("copies: median %.0f MB/s, %.2f of the socket's own throughput (goal >= 0.5)\n", median(copies),
              median(copy_ratios));
  ::kill(worker, SIGTERM);
  ::waitpid(worker, nullptr, 0);
  ::unlink(socket.c_str());
  return 0;
}
