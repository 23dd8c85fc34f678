// yonder-cuda-worker: executes one remote-CUDA session's driver calls
// against this machine's driver (src/gpu/remote/worker.h), serves its one
// client until it closes, and exits. The client is either already
// connected (--fd: yonderd hands it one end of a socket pair) or the first
// to connect to a unix socket (--listen: tests, the bench, gpu-check).
#include <dlfcn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "gpu/remote/worker.h"

int main(int argc, char** argv) {
  CLI::App app{"Executes a remote-CUDA session's driver calls on this machine's GPU"};
  std::string listen;
  int fd = -1;
  std::string driver = "libcuda.so.1";
  auto* listen_opt = app.add_option("--listen", listen, "unix socket to accept the session on");
  app.add_option("--fd", fd, "a connected socket to serve the session on")->excludes(listen_opt);
  app.add_option("--driver", driver, "the CUDA driver library to load");
  CLI11_PARSE(app, argc, argv);

  void* library = dlopen(driver.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "yonder-cuda-worker: cannot load the CUDA driver (%s): install the NVIDIA driver\n",
                 dlerror());
    return 2;
  }
  yonder::gpu::remote::CallWorker worker(yonder::gpu::remote::load_driver(library));
  if (fd >= 0) {
    int rc = yonder::gpu::remote::serve_connection(fd, worker);
    ::close(fd);
    return rc;
  }
  if (listen.empty()) {
    std::fprintf(stderr, "yonder-cuda-worker: give --listen SOCKET or --fd N\n");
    return 2;
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  // Bound under a temporary name and renamed once listening, so that the
  // socket's path appears only when a client can connect.
  std::string bound = listen + ".new";
  if (bound.size() >= sizeof(address.sun_path)) {
    std::fprintf(stderr, "yonder-cuda-worker: the socket path is too long: %s\n", listen.c_str());
    return 2;
  }
  std::memcpy(address.sun_path, bound.c_str(), bound.size());
  int server = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ::unlink(bound.c_str());
  if (server < 0 || ::bind(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(server, 1) != 0 || ::rename(bound.c_str(), listen.c_str()) != 0) {
    std::fprintf(stderr, "yonder-cuda-worker: cannot listen on %s: %s\n", listen.c_str(), std::strerror(errno));
    return 2;
  }
  int client = ::accept4(server, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(server);
  ::unlink(listen.c_str());
  if (client < 0) {
    std::fprintf(stderr, "yonder-cuda-worker: accept failed: %s\n", std::strerror(errno));
    return 2;
  }
  int rc = yonder::gpu::remote::serve_connection(client, worker);
  ::close(client);
  return rc;
}
