#include "cli/exec_command.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/exit_codes.h"
#include "jobs/protocol/exec_frames.h"
#include "os/interactive.h"

namespace yonder::cli {
namespace {

using nlohmann::json;
using jobs::protocol::ExecFrameType;

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

int cmd_exec(const Context& ctx, const ExecArgs& args) {
  std::vector<std::string> command = args.command.empty() ? std::vector<std::string>{"sh"} : args.command;
  auto size = os::window_size(STDIN_FILENO);
  if (!size) size = os::window_size(STDOUT_FILENO);
  json body = {{"job_id", args.job},
               {"command", command},
               {"tty", args.tty},
               {"rows", size ? size->first : 24},
               {"cols", size ? size->second : 80}};
  auto r = call_daemon(ctx, "POST", "/v1/jobs/exec", body.dump());
  if (!r) return report_daemon_error(ctx, r.error());
  if (r->status != 200) return print_error(daemon_error(*r), kExitCouldNotRun);
  auto session = json::parse(r->body, nullptr, false);
  if (!session.is_object() || !session.contains("token") || !session["token"].is_string()) {
    return print_error(make_error(ErrorCode::kInternal, "yonderd sent a malformed exec reply"), kExitCouldNotRun);
  }
  auto fd = os::connect_loopback(session.value("port", 0));
  if (!fd) return print_error(fd.error(), kExitCouldNotRun);
  int sock = *fd;
  if (!send_all(sock, session["token"].get<std::string>())) {
    ::close(sock);
    return print_error(make_error(ErrorCode::kUnavailable, "yonderd closed the exec session"), kExitCouldNotRun);
  }

  // A real terminal goes raw for a TTY session (keys, Ctrl-C included, go
  // to the remote process) and reports its size changes.
  std::unique_ptr<os::RawTerminal> raw;
  int winch = -1;
  if (args.tty && args.interactive && os::is_terminal(STDIN_FILENO)) {
    auto t = os::RawTerminal::enter(STDIN_FILENO);
    if (t) raw = std::move(*t);
    auto w = os::window_change_fd();
    if (w) winch = *w;
  }
  bool stdin_open = args.interactive;
  // Without -i the command sees an empty stdin; with a TTY (-t alone) it
  // stays open instead, as with docker exec -t: closing a PTY's input hangs
  // it up.
  if (!stdin_open && !args.tty) send_all(sock, jobs::protocol::encode_exec_frame(ExecFrameType::kStdinEof, {}));

  jobs::protocol::ExecFrameReader reader;
  std::optional<int> exit_code;
  std::string failure;
  char buf[65536];
  while (true) {
    pollfd fds[3];
    nfds_t n = 0;
    fds[n++] = {sock, POLLIN, 0};
    int stdin_slot = -1, winch_slot = -1;
    if (stdin_open) {
      stdin_slot = static_cast<int>(n);
      fds[n++] = {STDIN_FILENO, POLLIN, 0};
    }
    if (winch >= 0) {
      winch_slot = static_cast<int>(n);
      fds[n++] = {winch, POLLIN, 0};
    }
    if (::poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      failure = "poll failed";
      break;
    }
    if (winch_slot >= 0 && (fds[winch_slot].revents & POLLIN)) {
      os::drain_window_changes();
      if (auto s = os::window_size(STDIN_FILENO)) send_all(sock, jobs::protocol::encode_resize(s->first, s->second));
    }
    if (stdin_slot >= 0 && (fds[stdin_slot].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t got = ::read(STDIN_FILENO, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        stdin_open = false;
        send_all(sock, jobs::protocol::encode_exec_frame(ExecFrameType::kStdinEof, {}));
      } else if (!send_all(sock, jobs::protocol::encode_exec_frame(ExecFrameType::kData,
                                                         std::string_view(buf, static_cast<size_t>(got))))) {
        stdin_open = false;
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t got = ::recv(sock, buf, sizeof buf, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      reader.feed(std::string_view(buf, static_cast<size_t>(got)));
      while (true) {
        auto f = reader.next();
        if (!f) {
          failure = f.error().message();
          break;
        }
        if (!*f) break;
        const auto& frame = **f;
        if (frame.type == ExecFrameType::kData) write_all(STDOUT_FILENO, frame.payload);
        if (frame.type == ExecFrameType::kStderr) write_all(STDERR_FILENO, frame.payload);
        if (frame.type == ExecFrameType::kExit) {
          auto c = jobs::protocol::decode_exit(frame.payload);
          if (c) exit_code = *c;
        }
      }
      if (!failure.empty()) break;
    }
  }
  ::close(sock);
  raw.reset();  // the terminal as it was, before any message
  if (exit_code) return *exit_code;
  return print_error(
      make_error(ErrorCode::kUnavailable,
                 "the exec session ended without an exit code" +
                     (failure.empty() ? std::string(" (the link or the job went away)") : ": " + failure)),
      kExitCouldNotRun);
}

}  // namespace yonder::cli
