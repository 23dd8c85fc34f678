#include "os/terminal.h"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>

namespace yonder::os {

Result<std::string> read_secret(const std::string& prompt) {
  int fd = ::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return make_error(ErrorCode::kUnavailable, "no terminal to ask for the passphrase on");
  termios old {};
  bool have_tty = ::tcgetattr(fd, &old) == 0;
  if (have_tty) {
    termios quiet = old;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(fd, TCSAFLUSH, &quiet);
  }
  [[maybe_unused]] auto w = ::write(fd, prompt.data(), prompt.size());
  std::string line;
  char c = 0;
  while (line.size() < 4096) {
    ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || c == '\n') break;
    line += c;
  }
  if (have_tty) ::tcsetattr(fd, TCSAFLUSH, &old);
  w = ::write(fd, "\n", 1);
  ::close(fd);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }
bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

}  // namespace yonder::os
