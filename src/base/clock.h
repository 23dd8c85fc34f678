// Time as an injected interface, so protocol cores and tests never read the
// real clock directly. SystemClock is the real one; ManualClock is for tests.
#pragma once

#include <chrono>
#include <cstdint>

namespace yonder {

using TimePoint = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time (for expiry, audit timestamps).
  virtual TimePoint now() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::system_clock::now(); }
};

// A clock that only moves when told to. Not thread-safe: one test thread.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start) : now_(start) {}
  TimePoint now() const override { return now_; }
  void advance(std::chrono::nanoseconds d) { now_ += d; }

 private:
  TimePoint now_;
};

inline int64_t unix_seconds(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// The real clock's Unix time, for the stores that stamp rows (created_at,
// updated_at); code that decides by time takes a Clock instead.
inline int64_t unix_now_s() { return unix_seconds(std::chrono::system_clock::now()); }
inline int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace yonder
