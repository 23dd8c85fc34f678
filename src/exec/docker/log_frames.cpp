#include "exec/docker/log_frames.h"

#include <cctype>

namespace yonder::exec::docker {

Status FrameDecoder::feed(std::string_view bytes, const OnFrame& on_frame) {
  if (failed_) return make_error(ErrorCode::kInvalidArgument, "Docker stream is out of sync after an earlier error");
  buffer_.append(bytes);
  size_t pos = 0;
  while (buffer_.size() - pos >= kFrameHeaderBytes) {
    auto b = [&](size_t i) { return static_cast<uint8_t>(buffer_[pos + i]); };
    uint8_t stream = b(0);
    if (stream > 3 || b(1) != 0 || b(2) != 0 || b(3) != 0) {
      failed_ = true;
      buffer_.clear();
      return make_error(ErrorCode::kInvalidArgument,
                        "Docker stream frame has a bad header (stream byte " + std::to_string(stream) +
                            "); is the container running with a TTY?");
    }
    uint32_t length = (uint32_t{b(4)} << 24) | (uint32_t{b(5)} << 16) | (uint32_t{b(6)} << 8) | uint32_t{b(7)};
    if (length > max_frame_) {
      failed_ = true;
      buffer_.clear();
      return make_error(ErrorCode::kResourceExhausted, "Docker stream frame of " + std::to_string(length) +
                                                           " bytes is larger than the " + std::to_string(max_frame_) +
                                                           "-byte limit");
    }
    if (buffer_.size() - pos - kFrameHeaderBytes < length) break;
    on_frame(static_cast<LogStream>(stream), std::string_view(buffer_).substr(pos + kFrameHeaderBytes, length));
    pos += kFrameHeaderBytes + length;
  }
  buffer_.erase(0, pos);
  return ok_status();
}

std::string encode_frame(LogStream stream, std::string_view payload) {
  std::string out(kFrameHeaderBytes, '\0');
  out[0] = static_cast<char>(stream);
  auto n = static_cast<uint32_t>(payload.size());
  out[4] = static_cast<char>(n >> 24);
  out[5] = static_cast<char>(n >> 16);
  out[6] = static_cast<char>(n >> 8);
  out[7] = static_cast<char>(n);
  out.append(payload);
  return out;
}

void TtyLogDecoder::feed(std::string_view bytes, const OnEntry& on_entry) {
  buffer_.append(bytes);
  drain(false, on_entry);
}

void TtyLogDecoder::finish(const OnEntry& on_entry) { drain(true, on_entry); }

void TtyLogDecoder::drain(bool at_end, const OnEntry& on_entry) {
  // Docker's times are 30 characters ("2026-11-30T01:12:57.088105488Z");
  // split_timestamp accepts a shorter fraction too, up to 40.
  constexpr size_t kMaxPrefix = 41;
  std::string_view rest(buffer_);
  while (!rest.empty()) {
    int64_t at = 0;
    size_t body = 0;
    size_t space = rest.substr(0, kMaxPrefix).find(' ');
    if (space == std::string_view::npos && rest.size() < kMaxPrefix && !at_end) break;  // the time is still coming
    if (space != std::string_view::npos) {
      if (auto t = parse_rfc3339_ns(rest.substr(0, space))) {
        at = *t;
        body = space + 1;
      }
    }
    size_t limit = body + kTtyEntryBytes;
    size_t nl = rest.find('\n', body);
    size_t end;
    if (nl != std::string_view::npos && nl < limit) {
      end = nl + 1;
    } else if (rest.size() >= limit) {
      end = limit;
    } else if (at_end) {
      end = rest.size();
    } else {
      break;
    }
    if (end > body) on_entry(at, rest.substr(body, end - body));
    rest.remove_prefix(end);
  }
  buffer_.erase(0, buffer_.size() - rest.size());
}

namespace {

bool digits(std::string_view s, size_t pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  return true;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

Error bad_time(std::string_view text) {
  return make_error(ErrorCode::kInvalidArgument, "Docker sent a time that is not RFC 3339: '" +
                                                     std::string(text.substr(0, 40)) + "'");
}

}  // namespace

Result<int64_t> parse_rfc3339_ns(std::string_view t) {
  int year, month, day, hour, minute, second;
  if (!digits(t, 0, 4, year) || t.size() < 20 || t[4] != '-' || !digits(t, 5, 2, month) || t[7] != '-' ||
      !digits(t, 8, 2, day) || t[10] != 'T' || !digits(t, 11, 2, hour) || t[13] != ':' || !digits(t, 14, 2, minute) ||
      t[16] != ':' || !digits(t, 17, 2, second)) {
    return bad_time(t);
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return bad_time(t);
  size_t pos = 19;
  int64_t nanos = 0;
  if (pos < t.size() && t[pos] == '.') {
    ++pos;
    size_t n = 0;
    while (pos < t.size() && std::isdigit(static_cast<unsigned char>(t[pos]))) {
      if (n < 9) nanos = nanos * 10 + (t[pos] - '0');
      ++n;
      ++pos;
    }
    if (n == 0 || n > 9) return bad_time(t);
    for (; n < 9; ++n) nanos *= 10;
  }
  std::string_view zone = t.substr(pos);
  if (zone != "Z" && zone != "+00:00") return bad_time(t);
  if (year == 1) return int64_t{0};  // Go's zero time: "never"
  // Nanoseconds since 1970 fit in int64 only for years 1678..2261 (found by
  // docker_json_fuzz under UBSan: year 0000 overflowed).
  if (year < 1678 || year > 2261) return bad_time(t);
  int64_t days = days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second;
  return secs * 1'000'000'000 + nanos;
}

Result<std::pair<int64_t, std::string_view>> split_timestamp(std::string_view line) {
  size_t space = line.find(' ');
  if (space == std::string_view::npos || space > 40) {
    return make_error(ErrorCode::kInvalidArgument, "Docker log entry has no timestamp prefix");
  }
  auto ns = parse_rfc3339_ns(line.substr(0, space));
  if (!ns) return std::move(ns).error();
  return std::make_pair(*ns, line.substr(space + 1));
}

}  // namespace yonder::exec::docker
