#include "cli/run_attach.h"

#include "cli/signal_pipe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/daemon_api.h"
#include "cli/job_logs.h"

namespace yonder::cli {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// ---- the prompt after a first Ctrl-C on a terminal

enum class Choice { kStop, kDetach, kResume };

// Reads one key from the terminal (no Enter needed; Ctrl-C still raises
// SIGINT, which arrives through the pipe). `signal` is set to a signal that
// arrived while asking.
Choice ask(SignalPipe& sig, int& signal) {
  std::fprintf(stderr, "\nyonder: stop the job [s], detach [d], or keep watching [Enter]? (Ctrl-C again stops it) ");
  std::fflush(stderr);
  termios saved{};
  bool keys = ::tcgetattr(STDIN_FILENO, &saved) == 0;
  if (keys) {
    termios t = saved;
    t.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    ::tcsetattr(STDIN_FILENO, TCSANOW, &t);
  }
  Choice choice = Choice::kStop;
  while (true) {
    pollfd p[2] = {{STDIN_FILENO, POLLIN, 0}, {sig.fd(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;  // cannot ask: stop, never leave the job unattended by accident
    }
    if (p[1].revents & POLLIN) {
      signal = sig.take();
      break;
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char c = 0;
      ssize_t n = ::read(STDIN_FILENO, &c, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the terminal went away: stop
      if (c == 's' || c == 'S') break;
      if (c == 'd' || c == 'D') {
        choice = Choice::kDetach;
        break;
      }
      if (c == '\n' || c == '\r') {
        choice = Choice::kResume;
        break;
      }
    }
  }
  if (keys) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  std::fprintf(stderr, "%s\n", choice == Choice::kStop ? "s" : choice == Choice::kDetach ? "d" : "");
  return choice;
}

// ---- the run's forwards, through the daemon like `yonder forward`

class RunForwards {
 public:
  RunForwards(const Context& ctx, const std::string& job) : ctx_(ctx), job_(job) {}
  ~RunForwards() { close(); }
  RunForwards(const RunForwards&) = delete;
  RunForwards& operator=(const RunForwards&) = delete;

  // A forward that cannot be made is reported and skipped: the job runs on.
  void open(const std::vector<PortPair>& pairs) {
    for (const auto& p : pairs) {
      auto r =
          api(ctx_, "POST", "/v1/forwards", {{"job_id", job_}, {"local_port", p.local}, {"remote_port", p.remote}});
      if (!r) {
        std::fprintf(stderr, "yonder: could not forward to port %d of the job: %s\n", p.remote,
                     r.error().message().c_str());
        continue;
      }
      ids_.push_back(r->value("forward_id", ""));
      std::fprintf(stderr, "yonder: forwarding %s to port %d of the job\n", r->value("address", "").c_str(), p.remote);
    }
  }
  bool any() const { return !ids_.empty(); }
  void close() {
    for (const auto& id : ids_) {
      (void)api(ctx_, "POST", "/v1/forwards/stop", {{"forward_id", id}}, std::chrono::seconds(10));
    }
    ids_.clear();
  }

 private:
  const Context& ctx_;
  std::string job_;
  std::vector<std::string> ids_;
};

bool is_waiting(const std::string& state) {
  return state == "pending" || state == "queued" || state == "starting";  // queued: an older provider's word
}

void print_detach_hints(const std::string& job, bool had_forwards) {
  std::fprintf(stderr,
               "yonder: detached; job %s runs on.\n"
               "  yonder logs -f %s   follow its output\n"
               "  yonder stop %s      stop it\n"
               "  yonder cp %s:PATH   copy its files out\n",
               job.c_str(), job.c_str(), job.c_str(), job.c_str());
  if (had_forwards) std::fprintf(stderr, "  its forwards are closed: yonder forward %s LOCAL:REMOTE\n", job.c_str());
}

}  // namespace

Result<Attached> attach_to_job(const Context& ctx, const std::string& job, const AttachOptions& options) {
  auto installed = SignalPipe::install();
  if (!installed) return std::move(installed).error();
  SignalPipe& sig = **installed;
  LogFollower logs(ctx, job);
  logs.set_raw(options.raw);
  RunForwards forwards(ctx, job);
  Attached result;
  bool stopping = false;
  // A forward needs a running job: until then the job's state is asked
  // between short waits for output (which return early when output comes).
  bool forwards_pending = !options.forwards.empty();
  milliseconds state_wait{100};

  while (true) {
    if (forwards_pending && !stopping) {
      auto view = api(ctx, "GET", "/v1/jobs/inspect?id=" + job, nullptr, std::chrono::seconds(60), sig.fd());
      if (view) {
        std::string state = view->value("state", "");
        if (state == "running") {
          forwards.open(options.forwards);
          forwards_pending = false;
        } else if (!is_waiting(state)) {
          forwards_pending = false;  // it ended before it ran: nothing to forward to
        }
      }  // else: interrupted, or a passing failure; asked again next round
    }
    milliseconds wait = forwards_pending ? state_wait : kFollowWait;
    state_wait = std::min(state_wait * 2, milliseconds(1000));
    auto step = logs.next(wait, true, sig.fd());
    if (!step) return std::move(step).error();
    if (step->ended) return result;
    int s = sig.take();
    if (s == 0) continue;

    if (stopping) {
      std::fprintf(stderr, "yonder: job %s is stopping; waiting for it to end\n", job.c_str());
      continue;
    }
    Choice choice = Choice::kStop;
    if (options.prompt && s == SIGINT) {
      int during = 0;
      choice = ask(sig, during);
      if (during == SIGTERM) s = SIGTERM;
    }
    if (choice == Choice::kResume) continue;
    if (choice == Choice::kDetach) {
      print_detach_hints(job, forwards.any());
      result.detached = true;
      return result;
    }
    auto stopped = api(ctx, "POST", "/v1/jobs/stop", {{"job_id", job}});
    if (!stopped) {
      // Most often it has just ended; following on shows how.
      std::fprintf(stderr, "yonder: could not stop job %s: %s\n", job.c_str(), stopped.error().message().c_str());
    } else {
      std::fprintf(stderr, "yonder: stopping job %s\n", job.c_str());
    }
    stopping = true;
    result.stopped_by = s;
  }
}

}  // namespace yonder::cli
