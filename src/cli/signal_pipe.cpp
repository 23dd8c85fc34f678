#include "cli/signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace yonder::cli {
namespace {

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  int saved = errno;
  auto b = static_cast<unsigned char>(sig);
  (void)!::write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

}  // namespace

Result<std::unique_ptr<SignalPipe>> SignalPipe::install() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return make_error(ErrorCode::kInternal, std::string("pipe: ") + std::strerror(errno));
  }
  std::unique_ptr<SignalPipe> p(new SignalPipe());
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, nullptr, &p->old_int_);
  if (p->old_int_.sa_handler != SIG_IGN) {
    ::sigaction(SIGINT, &sa, nullptr);
    p->int_caught_ = true;
  }
  ::sigaction(SIGTERM, &sa, &p->old_term_);
  return p;
}

SignalPipe::~SignalPipe() {
  if (int_caught_) ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);
  g_signal_pipe[0] = g_signal_pipe[1] = -1;
}

int SignalPipe::fd() const { return g_signal_pipe[0]; }

int SignalPipe::take() {
  unsigned char b = 0;
  return ::read(g_signal_pipe[0], &b, 1) == 1 ? b : 0;
}

}  // namespace yonder::cli
