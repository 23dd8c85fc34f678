// A token bucket in bytes (or messages): `rate` tokens a second up to
// `burst`. Pure: the caller passes `now` (a steady clock), so tests drive it
// with a manual clock. A rate of 0 means unlimited.
//
// consume() may take more than is available (two pipes of one node read at
// once): the bucket goes into debt and refills from below zero, so the long
// run rate still holds.
//
// take(now) is the one-action form: true, and a token spent, when one is
// available.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>

namespace yonder {

using MonoTime = std::chrono::steady_clock::time_point;

class TokenBucket {
 public:
  TokenBucket(double rate, double burst, MonoTime now)
      : rate_(rate), burst_(std::max(burst, 1.0)), tokens_(burst_), refilled_(now) {}

  bool unlimited() const { return rate_ <= 0; }
  double rate() const { return rate_; }
  double burst() const { return burst_; }

  // Whole tokens available now (0 while in debt); huge when unlimited.
  uint64_t available(MonoTime now) {
    if (unlimited()) return UINT64_MAX / 2;
    refill(now);
    return tokens_ > 0 ? static_cast<uint64_t>(tokens_) : 0;
  }
  void consume(uint64_t n) {
    if (!unlimited()) tokens_ -= static_cast<double>(n);
  }
  bool take(MonoTime now) {
    if (available(now) < 1) return false;
    consume(1);
    return true;
  }
  // How long until `n` tokens (at most the burst) are available.
  std::chrono::nanoseconds wait_for(uint64_t n, MonoTime now) {
    if (unlimited()) return std::chrono::nanoseconds(0);
    refill(now);
    double want = std::min(static_cast<double>(n), burst_);
    if (tokens_ >= want) return std::chrono::nanoseconds(0);
    return std::chrono::nanoseconds(static_cast<int64_t>(std::ceil((want - tokens_) / rate_ * 1e9)));
  }
  // Full again (nothing spent that has not been refilled): forgetting the
  // bucket now and making a new one later changes nothing.
  bool full(MonoTime now) {
    if (unlimited()) return true;
    refill(now);
    return tokens_ >= burst_;
  }

 private:
  void refill(MonoTime now) {
    if (now <= refilled_) return;
    double elapsed = std::chrono::duration<double>(now - refilled_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * rate_);
    refilled_ = now;
  }

  double rate_;
  double burst_;
  double tokens_;
  MonoTime refilled_;
};

}  // namespace yonder
