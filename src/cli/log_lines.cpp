#include "cli/log_lines.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>

namespace yonder::cli {

void LogTail::add(const std::string& stream, int64_t unix_ns, std::string_view data) {
  while (!data.empty()) {
    size_t nl = data.find('\n');
    std::string_view piece = data.substr(0, nl == std::string_view::npos ? data.size() : nl + 1);
    data.remove_prefix(piece.size());
    // The line this stream left open, if any: the piece continues it.
    auto open = std::find_if(lines_.rbegin(), lines_.rend(), [&](const LogLine& l) { return l.stream == stream; });
    if (open != lines_.rend() && !open->text.empty() && open->text.back() != '\n') {
      open->text.append(piece);
      continue;
    }
    lines_.push_back({stream, unix_ns, std::string(piece)});
    while (lines_.size() > max_) lines_.pop_front();
  }
}

Result<std::optional<size_t>> parse_tail(const std::string& text) {
  if (text == "all") return std::optional<size_t>();
  size_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return make_error(ErrorCode::kInvalidArgument,
                      "--tail takes a number of lines (e.g. --tail 20) or all, not \"" + text + "\"");
  }
  return std::optional<size_t>(n);
}

std::string rfc3339_nano(int64_t unix_ns) {
  int64_t s = unix_ns / 1'000'000'000, ns = unix_ns % 1'000'000'000;
  if (ns < 0) {
    s -= 1;
    ns += 1'000'000'000;
  }
  std::time_t t = static_cast<std::time_t>(s);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(ns));
  return buf;
}

std::string LineStamper::stamp(std::string_view text, int64_t unix_ns) {
  std::string out;
  std::string prefix = rfc3339_nano(unix_ns) + " ";
  for (char c : text) {
    if (at_line_start_) out += prefix;
    out += c;
    at_line_start_ = c == '\n';
  }
  return out;
}

}  // namespace yonder::cli
