// A job's output as the daemon serves it (the provider's persisted log, read
// from a byte offset), printed to our stdout and stderr: for `yonder logs`
// and for `yonder run` while it is attached.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "base/terminal_text.h"
#include "cli/context.h"
#include "cli/log_lines.h"

namespace yonder::cli {

class LogFollower {
 public:
  LogFollower(const Context& ctx, std::string job) : ctx_(ctx), job_(std::move(job)) {}

  struct Step {
    bool ended = false;        // the job has ended and all its output is printed
    bool printed = false;      // this step printed something
    bool interrupted = false;  // interrupt_fd became readable; nothing was lost
  };
  // Prints what the job wrote since the last step, waiting up to `wait` for
  // something new (0: what there is now). With `follow`, rides out a lost
  // provider for up to 2 minutes: the provider keeps the log, so reading on
  // from the last offset loses and repeats nothing. Gives up at once when
  // `interrupt_fd` (>= 0) is readable.
  Result<Step> next(std::chrono::milliseconds wait, bool follow, int interrupt_fd = -1);
  // Leaves out records written before this time (Unix ns; 0: none left out).
  void set_since(int64_t unix_ns) { since_ns_ = unix_ns; }
  // Passes the job's control sequences through as they came (`--raw`);
  // by default TerminalFilter (base/terminal_text.h) drops all but colours
  // and the cursor moves of progress bars.
  void set_raw(bool raw) { raw_ = raw; }
  // Puts each line's RFC 3339 time before it (`-t`).
  void set_timestamps(bool on) { timestamps_ = on; }
  // Prints nothing, only follows to the end (`yonder wait`).
  void set_quiet(bool on) { quiet_ = on; }
  // Reads on from this record boundary (a view's log_bytes) instead of the start.
  void set_offset(uint64_t offset) { offset_ = offset; }
  // Holds what the steps read, keeping its last `lines` lines, until
  // release_tail() prints them (`--tail N`: read to the end first).
  void hold_tail(size_t lines) { tail_.emplace(lines); }
  void release_tail();

 private:
  // One record's text to where its stream goes, filtered and stamped.
  void emit(const std::string& stream, int64_t unix_ns, const std::string& text);

  const Context& ctx_;
  std::string job_;
  uint64_t offset_ = 0;
  std::chrono::steady_clock::time_point lost_since_{};
  bool told_ = false;
  int64_t since_ns_ = 0;
  bool raw_ = false;
  bool timestamps_ = false;
  bool quiet_ = false;
  std::optional<LogTail> tail_;
  TerminalFilter out_filter_, err_filter_;  // one per stream: a sequence may span records
  LineStamper out_stamper_, err_stamper_;
};

// How long one follow step waits at the daemon for new output.
inline constexpr std::chrono::milliseconds kFollowWait{15000};

struct LogsOptions {
  bool follow = false;   // until the job ends
  int64_t since_ns = 0;  // only records written from then on (Unix ns; 0: all)
  bool raw = false;
  std::optional<size_t> tail;  // only the last N lines of what there is now (then, with follow, the rest)
  bool timestamps = false;
};

// `yonder logs`: prints the job's output; with `follow`, until it ends.
// Returns whether the end was seen.
Result<bool> print_logs(const Context& ctx, const std::string& job, const LogsOptions& options);

// `--since`: a duration back from now ("10m", "2h"), an RFC 3339 UTC time
// ("2026-11-30T14:00:00Z") or Unix seconds. Returns Unix ns.
Result<int64_t> parse_since(const std::string& text);

}  // namespace yonder::cli
