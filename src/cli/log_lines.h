// A job's log cut into lines for `yonder logs --tail N` and `-t`, without
// I/O. The provider's log is a sequence of records (jobs/provider/job_log.h),
// each a chunk of one stream with the time the engine handed it over; a
// line may span records, and the streams interleave.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace yonder::cli {

struct LogLine {
  std::string stream;   // "stdout", "stderr" or "notice" (the provider's own)
  int64_t unix_ns = 0;  // when the record that began the line was written
  std::string text;     // with its '\n', unless the log ends inside it
};

// The last `lines` lines of the records given to add(), over all streams
// together (as `docker logs --tail` counts them). Holds at most that many.
class LogTail {
 public:
  explicit LogTail(size_t lines) : max_(lines) {}
  void add(const std::string& stream, int64_t unix_ns, std::string_view data);
  const std::deque<LogLine>& lines() const { return lines_; }

 private:
  size_t max_;
  std::deque<LogLine> lines_;
};

// `--tail`/`-n`: "all" (nullopt: every line) or a count of lines.
Result<std::optional<size_t>> parse_tail(const std::string& text);

// Unix ns as RFC 3339 in UTC with nanoseconds: "2026-12-03T18:10:00.123456789Z"
// (docker's `logs -t`).
std::string rfc3339_nano(int64_t unix_ns);

// Puts "TIME " before each line of one stream's text as it comes, however
// it is split: a line continued by a later record keeps its first time.
class LineStamper {
 public:
  std::string stamp(std::string_view text, int64_t unix_ns);

 private:
  bool at_line_start_ = true;
};

}  // namespace yonder::cli
