#include "cli/job_logs.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "base/bytes.h"
#include "cli/daemon_api.h"
#include "crypto/scope.h"

namespace yonder::cli {
namespace {

void job_write_all(FILE* f, const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), f);
  std::fflush(f);
}

bool readable(int fd, int timeout_ms) {
  if (fd < 0) return false;
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) > 0 && (p.revents & POLLIN);
}

}  // namespace

Result<LogFollower::Step> LogFollower::next(std::chrono::milliseconds wait, bool follow, int interrupt_fd) {
  Step step;
  std::string path = "/v1/jobs/logs?id=" + job_ + "&offset=" + std::to_string(offset_) +
                     "&wait_ms=" + std::to_string(follow ? wait.count() : 0);
  auto r = api(ctx_, "GET", path, nullptr, wait + std::chrono::seconds(30), interrupt_fd);
  if (readable(interrupt_fd, 0)) {
    step.interrupted = true;
    return step;
  }
  if (!r) {
    bool transient = r.error().code() == ErrorCode::kUnavailable && !no_daemon(r.error());
    if (!follow || !transient) return std::move(r).error();
    auto now = std::chrono::steady_clock::now();
    if (!told_) {
      std::fprintf(stderr, "yonder: lost contact with the provider (%s); retrying\n", r.error().message().c_str());
      told_ = true;
      lost_since_ = now;
    }
    if (now - lost_since_ > std::chrono::minutes(2)) {
      return make_error(ErrorCode::kUnavailable,
                        "the provider has been unreachable for 2 minutes; the job may "
                        "still run: `yonder logs -f " +
                            job_ + "` re-attaches");
    }
    // A second before the next try, cut short by an interrupt.
    if (interrupt_fd >= 0) {
      step.interrupted = readable(interrupt_fd, 1000);
    } else {
      ::poll(nullptr, 0, 1000);
    }
    return step;
  }
  if (told_) {
    std::fprintf(stderr, "yonder: reconnected\n");
    told_ = false;
  }
  const auto& records = (*r)["records"];
  for (const auto& rec : records) {
    if (since_ns_ > 0 && rec.contains("t") && rec["t"].is_number_integer() && rec["t"].get<int64_t>() < since_ns_) continue;
    auto bytes = base64_decode(rec.value("data", ""));
    if (!bytes) continue;
    std::string text(bytes->begin(), bytes->end());
    std::string stream = rec.value("stream", "stdout");
    int64_t t = rec.contains("t") && rec["t"].is_number_integer() ? rec["t"].get<int64_t>() : 0;
    if (quiet_) continue;
    if (tail_) {
      tail_->add(stream, t, text);
    } else {
      emit(stream, t, text);
    }
  }
  step.printed = !records.empty();
  offset_ = r->value("next_offset", offset_);
  step.ended = r->value("ended", false);
  return step;
}

void LogFollower::emit(const std::string& stream, int64_t unix_ns, const std::string& text) {
  if (stream == "stdout") {
    std::string out = raw_ ? text : out_filter_.feed(text);
    job_write_all(stdout, timestamps_ ? out_stamper_.stamp(out, unix_ns) : out);
  } else if (stream == "stderr") {
    std::string err = raw_ ? text : err_filter_.feed(text);
    job_write_all(stderr, timestamps_ ? err_stamper_.stamp(err, unix_ns) : err);
  } else {  // the provider's own note about the job: its words, made safe
    std::string note = "yonder: " + terminal_safe(text, true) + (text.empty() || text.back() != '\n' ? "\n" : "");
    job_write_all(stderr, timestamps_ ? rfc3339_nano(unix_ns) + " " + note : note);
  }
}

void LogFollower::release_tail() {
  if (!tail_) return;
  LogTail held = std::move(*tail_);
  tail_.reset();
  for (const auto& line : held.lines()) emit(line.stream, line.unix_ns, line.text);
}

Result<int64_t> parse_since(const std::string& text) {
  constexpr int64_t kNs = 1'000'000'000;
  if (!text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) && text.size() <= 12) {
    return std::stoll(text) * kNs;
  }
  std::tm tm{};
  const char* end = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end != nullptr && *end == '\0') return static_cast<int64_t>(::timegm(&tm)) * kNs;
  auto d = parse_duration_s(text);
  if (!d) {
    return make_error(ErrorCode::kInvalidArgument, "--since takes a duration back from now (10m, 2h), an RFC 3339 UTC "
                                                   "time (2026-11-30T14:00:00Z) or Unix seconds, not \"" + text + "\"");
  }
  auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return now - *d * kNs;
}

Result<bool> print_logs(const Context& ctx, const std::string& job, const LogsOptions& options) {
  LogFollower logs(ctx, job);
  logs.set_raw(options.raw);
  logs.set_since(options.since_ns);
  logs.set_timestamps(options.timestamps);
  // --tail: read what there is now without waiting, keep its last lines,
  // print them, then (with -f) follow as usual.
  bool holding = options.tail.has_value();
  if (holding) logs.hold_tail(*options.tail);
  while (true) {
    auto step = logs.next(holding ? std::chrono::milliseconds(0) : kFollowWait, options.follow);
    if (!step) return std::move(step).error();
    if (holding && (step->ended || !step->printed)) {
      logs.release_tail();
      holding = false;
    }
    if (step->ended) return true;
    if (!options.follow && !step->printed) return false;
  }
}

}  // namespace yonder::cli
