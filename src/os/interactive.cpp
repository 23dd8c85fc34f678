#include "os/interactive.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace yonder::os {

struct RawTerminal::Saved {
  termios mode{};
};

Result<std::unique_ptr<RawTerminal>> RawTerminal::enter(int fd) {
  auto saved = std::make_unique<Saved>();
  if (::tcgetattr(fd, &saved->mode) != 0) {
    return make_error(ErrorCode::kFailedPrecondition, std::string("not a terminal: ") + std::strerror(errno));
  }
  termios raw = saved->mode;
  ::cfmakeraw(&raw);
  if (::tcsetattr(fd, TCSANOW, &raw) != 0) {
    return make_error(ErrorCode::kFailedPrecondition, std::string("cannot set raw mode: ") + std::strerror(errno));
  }
  std::unique_ptr<RawTerminal> t(new RawTerminal());
  t->fd_ = fd;
  t->saved_ = std::move(saved);
  return t;
}

RawTerminal::~RawTerminal() {
  if (fd_ >= 0 && saved_) ::tcsetattr(fd_, TCSANOW, &saved_->mode);
}

bool is_terminal(int fd) {
  return ::isatty(fd) == 1;
}

std::optional<std::pair<int, int>> window_size(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0) return std::nullopt;
  return std::make_pair(static_cast<int>(ws.ws_row), static_cast<int>(ws.ws_col));
}

namespace {

int g_winch_pipe[2] = {-1, -1};

void on_winch(int) {
  int saved = errno;
  char b = 1;
  (void)!::write(g_winch_pipe[1], &b, 1);
  errno = saved;
}

}  // namespace

Result<int> window_change_fd() {
  if (g_winch_pipe[0] >= 0) return g_winch_pipe[0];
  if (::pipe2(g_winch_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    return make_error(ErrorCode::kInternal, std::string("pipe: ") + std::strerror(errno));
  }
  struct sigaction sa {};
  sa.sa_handler = on_winch;
  sa.sa_flags = SA_RESTART;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGWINCH, &sa, nullptr);
  return g_winch_pipe[0];
}

void drain_window_changes() {
  char buf[64];
  while (g_winch_pipe[0] >= 0 && ::read(g_winch_pipe[0], buf, sizeof buf) > 0) {
  }
}

Result<int> connect_loopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(ErrorCode::kUnavailable, std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    ::close(fd);
    return make_error(ErrorCode::kUnavailable,
                      "connecting to 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(e));
  }
  return fd;
}

}  // namespace yonder::os
