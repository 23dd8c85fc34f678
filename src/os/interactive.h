// What an interactive command (`yonder exec -it`) needs from the OS: the
// local terminal in raw mode and back, its size, a readable fd that signals
// window changes (SIGWINCH), and a TCP connection to a loopback port.
//
// Threading: the CLI's one thread. RawTerminal restores the saved mode in
// its destructor, so leave it in scope until the session ends.
#pragma once

#include <memory>
#include <optional>
#include <utility>

#include "base/error.h"

namespace yonder::os {

class RawTerminal {
 public:
  // Puts terminal `fd` in raw mode (no echo, no line editing, no signals
  // from keys: Ctrl-C goes to the remote process). Fails if fd is no terminal.
  static Result<std::unique_ptr<RawTerminal>> enter(int fd);
  ~RawTerminal();
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  RawTerminal() = default;
  struct Saved;
  int fd_ = -1;
  std::unique_ptr<Saved> saved_;
};

bool is_terminal(int fd);
// Rows and columns of terminal `fd`; nullopt when it is none.
std::optional<std::pair<int, int>> window_size(int fd);

// An fd that becomes readable after each SIGWINCH (self-pipe); drain it
// with drain_window_changes(). Installs the handler on first use.
Result<int> window_change_fd();
void drain_window_changes();

// A blocking TCP connection to 127.0.0.1:port; the caller closes the fd.
Result<int> connect_loopback(int port);

}  // namespace yonder::os
