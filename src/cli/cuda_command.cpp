#include "cli/cuda_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/daemon_api.h"
#include "cli/exit_codes.h"
#include "os/process.h"

namespace yonder::cli {

int cmd_cuda(const Context& ctx, const CudaArgs& args) {
  if (args.command.empty()) {
    return print_error(
        make_error(ErrorCode::kInvalidArgument, "give the program to run: yonder cuda --on PEER -- PROGRAM [ARGS...]"),
        kExitUsage);
  }
  std::string standin = os::private_lib_path("cuda");
  std::error_code ec;
  if (standin.empty() || !std::filesystem::exists(standin + "/libcuda.so.1", ec)) {
    return print_error(make_error(ErrorCode::kNotFound,
                                  "the stand-in driver libcuda.so.1 is missing from " + standin + ": reinstall yonder"),
                       kExitError);
  }
  auto session = api(ctx, "POST", "/v1/cuda/sessions", {{"target", args.on}});
  if (!session) return fail(ctx, session.error());
  std::string socket = session->value("socket", "");
  std::string session_id = session->value("session_id", "");

  // The program is ours to wait for: Ctrl-C reaches it (same process
  // group), and we end when it does.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old_int {};
  struct sigaction old_quit {};
  ::sigaction(SIGINT, &ignore, &old_int);
  ::sigaction(SIGQUIT, &ignore, &old_quit);
  pid_t child = ::fork();
  if (child == 0) {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGQUIT, &old_quit, nullptr);
    const char* old = std::getenv("LD_LIBRARY_PATH");
    std::string path = standin + (old != nullptr && *old != '\0' ? ":" + std::string(old) : "");
    ::setenv("LD_LIBRARY_PATH", path.c_str(), 1);
    ::setenv("YONDER_CUDA_SOCKET", socket.c_str(), 1);
    std::vector<char*> argv;
    for (const auto& a : args.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "yonder: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  int code = kExitError;
  if (child > 0) {
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } else {
    std::fprintf(stderr, "yonder: cannot start %s: %s\n", args.command[0].c_str(), std::strerror(errno));
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGQUIT, &old_quit, nullptr);
  (void)api(ctx, "POST", "/v1/cuda/sessions/stop", {{"session_id", session_id}});
  return code;
}

}  // namespace yonder::cli
